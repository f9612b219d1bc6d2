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

export interface RunTable<T extends RunKey> {
  get(runId: string): Promise<T | undefined>;
  /**
   * Only `keys` of the run (and its tenant): a status poll reads a few fields of a row
   * whose body holds every step and log line. Keys are the record's own top-level names.
   */
  pick<K extends keyof T & string>(runId: string, keys: readonly K[]): Promise<(Pick<T, K> & RunKey) | undefined>;
  put(run: T): Promise<void>;
  /** Writes `run` unless its stored row has ended (queued or running, or none yet); true when written. */
  putUnlessEnded(run: T): Promise<boolean>;
  /**
   * The fenced write of a runner: as putUnlessEnded, and only while the claim
   * `leaseKey` (an AtomicOps key) is held by `owner` and unexpired, checked in
   * the same step as the write. False: not written (ended, or the lease is gone).
   */
  putIfLeased(run: T, leaseKey: string, owner: string): Promise<boolean>;
  /** A tenant's runs, newest first (created_at, then run_id); throws BadCursor for a cursor it did not make. */
  page(tenantId: string, q: RunQuery): Promise<RunPage<T>>;
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
 * The few small fields of a run a status poll reads. The SQL stores keep them,
 * besides the whole row, in a `head` column written with every row, so a poll
 * reads a hundred bytes however many steps and log lines the run has.
 */
export const HEAD_KEYS = ['phase', 'halt_class', 'failure_help', 'updated_at', 'ended_at'] as const;
const HEAD: ReadonlySet<string> = new Set(HEAD_KEYS);

/** The stored text of a run: its whole body, and its head (its RunKey and HEAD_KEYS, null for one it lacks, as pick answers). */
export function runText(run: RunKey): { body: string; head: string } {
  const r = run as unknown as Record<string, unknown>;
  const head: Record<string, unknown> = { ...pickKeys(run, []) };
  for (const k of HEAD_KEYS) head[k] = r[k] ?? null;
  return { body: JSON.stringify(run), head: JSON.stringify(head) };
}

/** True when pick can answer `keys` from the head alone. */
export function inHead(keys: readonly string[]): boolean {
  return keys.every((k) => HEAD.has(k));
}

/** `keys` of `row` and its RunKey, as RunTable.pick answers; a key the row lacks is left out, as JSON would. */
export function pickKeys<T extends RunKey, K extends keyof T & string>(row: T, keys: readonly K[]): Pick<T, K> & RunKey {
  const out: Record<string, unknown> = { run_id: row.run_id, tenant_id: row.tenant_id, status: row.status, created_at: row.created_at };
  for (const k of keys) if (row[k] !== undefined) out[k] = row[k];
  return out as Pick<T, K> & RunKey;
}

/** A top-level key of a run record, safe to name in SQL (pick's keys come from code, checked anyway). */
export function pickableKey(k: string): string {
  if (!/^[a-z_]{1,64}$/.test(k)) throw new Error(`not a run record key: ${k}`);
  return k;
}
