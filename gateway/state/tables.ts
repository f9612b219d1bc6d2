// What the store of record keeps, whatever holds it (SQLite, Redis, memory):
// keyed stores (recipes), run rows that can be listed per tenant newest first,
// and per-run event logs whose seq is taken in the same step as the append.

import type { OutboxItem } from './outbox.ts';

/** A store of values by key under one namespace; writes throw when they fail. */
export interface KeyedStore<T> {
  get(key: string): Promise<T | undefined>;
  set(key: string, value: T): Promise<void>;
  /** true when the key existed */
  delete(key: string): Promise<boolean>;
  keys(): Promise<string[]>;
}

/** The columns every run row is found by. */
export interface RunKey {
  run_id: string;
  tenant_id: string;
  status: string;
  created_at: string;
}

export interface RunPage<T> {
  items: T[];
  /** opaque; null on the last page */
  next_cursor: string | null;
}

export interface RunQuery {
  status?: string;
  limit: number;
  cursor?: string;
}

export interface RunTable<T extends RunKey, V extends RunKey = RunKey> {
  get(runId: string): Promise<T | undefined>;
  /**
   * The run's view (RunView.of of its row), read from the row's head: a status poll reads a few
   * hundred bytes of a row whose body holds every step and log line.
   */
  view(runId: string): Promise<V | undefined>;
  put(run: T): Promise<void>;
  /** Writes `run` unless its stored row has ended (queued or running, or none yet); true when written. */
  putUnlessEnded(run: T): Promise<boolean>;
  /**
   * The fenced write of a runner: as putUnlessEnded, and only while the claim
   * `leaseKey` (an AtomicOps key) is held by `owner` and unexpired, checked in
   * the same step as the write. False: not written (ended, or the lease is gone).
   */
  putIfLeased(run: T, leaseKey: string, owner: string): Promise<boolean>;
  /** A tenant's runs as views, newest first (created_at, then run_id); throws BadCursor for a cursor it did not make. */
  page(tenantId: string, q: RunQuery): Promise<RunPage<V>>;
  /** Every run still queued or running, oldest first (recovery). */
  unfinished(): Promise<T[]>;
}

/** Per-run event logs: the seq is taken in the same step as the append, dense from 1 whoever appends. */
export interface EventTable {
  /** Stores `event` as the run's next event; returns it with its seq. */
  append<E extends Record<string, unknown>>(runId: string, event: E): Promise<E & { seq: number }>;
  /**
   * Writes the run row (as RunTable.put) and appends its event in one
   * transaction: one commit where put then append took two, and never a run
   * without that event. A run's acceptance (row + first event) goes through here.
   */
  appendWithRun<E extends Record<string, unknown>>(run: RunKey, event: E): Promise<E & { seq: number }>;
  /**
   * A runner's fenced save with its event, in one transaction: writes the run
   * row as RunTable.putIfLeased and appends `event` only if that write held.
   * Null: neither was written (the run ended, or the lease is not `owner`'s), so
   * a runner that lost its run never adds to its log.
   */
  appendIfLeased<E extends Record<string, unknown>>(run: RunKey, leaseKey: string, owner: string, event: E): Promise<(E & { seq: number }) | null>;
  /**
   * A run's ending with its event, in one transaction: writes the run row as
   * RunTable.putUnlessEnded and appends `event` only if that write held, with
   * `outbox` (its completion webhook) when given. So a reader who sees the run
   * ended finds its run.ended event, a crash cannot end a run without queueing
   * its webhook, and of two endings racing (a cancel, a recovery) one writes
   * everything and the other nothing.
   */
  appendIfUnended<E extends Record<string, unknown>>(run: RunKey, event: E, outbox?: OutboxItem): Promise<(E & { seq: number }) | null>;
  /**
   * A runner's event without a save: appended only while the run is unfinished
   * and the lease is `owner`'s, checked in the same transaction. Null: not
   * appended, so a runner that lost its run never adds to its log between saves.
   */
  appendWhileLeased<E extends Record<string, unknown>>(runId: string, leaseKey: string, owner: string, event: E): Promise<(E & { seq: number }) | null>;
  /** The run's events with seq > after, oldest first. */
  after<E extends Record<string, unknown>>(runId: string, seq: number): Promise<Array<E & { seq: number }>>;
}

export class BadCursor extends Error {}

/** The cursor after `last`: where the next page starts. Opaque to callers. */
export function encodeCursor(last: RunKey): string {
  return Buffer.from(JSON.stringify([last.created_at, last.run_id])).toString('base64url');
}

export function decodeCursor(cursor: string): { created_at: string; run_id: string } {
  try {
    if (cursor.length > 400) throw new Error('too long');
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string') return { created_at: v[0], run_id: v[1] };
  } catch {
    /* falls through */
  }
  throw new BadCursor('cursor is not one this service made');
}

/** Newest first, run_id breaking ties: the one order every RunTable pages in. */
export function newestFirst(a: RunKey, b: RunKey): number {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? 1 : -1;
  return a.run_id < b.run_id ? 1 : a.run_id > b.run_id ? -1 : 0;
}

/** Pages an in-memory list of runs the way the SQL tables do. */
export function pageOf<T extends RunKey>(all: T[], tenantId: string, q: RunQuery): RunPage<T> {
  const after = q.cursor ? decodeCursor(q.cursor) : undefined;
  const mine = all
    .filter((r) => r.tenant_id === tenantId && (!q.status || r.status === q.status))
    .sort(newestFirst)
    .filter((r) => !after || newestFirst(r, { ...after, tenant_id: tenantId, status: '' }) > 0);
  const items = mine.slice(0, q.limit);
  return { items, next_cursor: mine.length > q.limit ? encodeCursor(items[items.length - 1]) : null };
}

export const UNFINISHED: ReadonlySet<string> = new Set(['queued', 'running']);

/**
 * What a run table keeps of each row besides its body, in a `head` column written by the same
 * statement: a projection small enough to read on every status poll and list item, so neither
 * parses a body holding every step and log line. The run service says what it is (its lifecycle
 * body); `version` names that projection, so a head written before it changed (or a row from
 * before heads) is computed again from the body until the row's next write.
 */
export interface RunView<T extends RunKey = RunKey, V extends RunKey = RunKey> {
  /** a small integer; bump it whenever `of` answers differently */
  readonly version: number;
  of(run: T): V;
}

/** The view of a table nobody gave one: a row's RunKey. */
export const KEY_VIEW: RunView = { version: 0, of: (r) => ({ run_id: r.run_id, tenant_id: r.tenant_id, status: r.status, created_at: r.created_at }) };

/** How a stored head of `view`'s version starts: the version comes first, so SQL can tell a stale head by its prefix. */
export function headPrefix(view: RunView): string {
  if (!Number.isSafeInteger(view.version) || view.version < 0) throw new Error(`a run view's version is a non-negative integer, not ${view.version}`);
  return `{"_v":${view.version},`;
}

/** A row's head, and its body only when the head is missing or of another version (viewOfRow): SQL both dialects speak. */
export function headColumns(view: RunView): string {
  const prefix = headPrefix(view);
  return `head, CASE WHEN head IS NULL OR substr(head, 1, ${prefix.length}) <> '${prefix}' THEN body END AS body`;
}

export type HeadRow = { head: string | null; body: string | null };

/** The stored text of a run: its whole body, and its head (the view, stamped with its version). */
export function runText<T extends RunKey>(run: T, view: RunView<T, RunKey>): { body: string; head: string } {
  // the view always holds its RunKey, so its JSON is never `{}`; a spread of it into a new object cost more than the text
  return { body: JSON.stringify(run), head: headPrefix(view) + JSON.stringify(view.of(run)).slice(1) };
}

/** The view of a stored row: computed from its body when the SQL handed the body over (its head was stale or missing), else its head. */
export function viewOfRow<T extends RunKey, V extends RunKey>(view: RunView<T, V>, row: HeadRow): V {
  if (row.body !== null) return view.of(JSON.parse(row.body) as T);
  // the head is `{"_v":N,` then the view's own keys: parsed without the stamp, since a `delete` after the parse
  // leaves V8 a dictionary-mode object that every later read and the response's stringify pay for (~5 us a poll)
  const head = row.head!;
  return JSON.parse('{' + head.slice(head.indexOf(',') + 1)) as V;
}
