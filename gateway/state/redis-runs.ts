// Run rows and run events on Redis (SERVICE_REDIS_URL without a database):
// every write of a row or an event is one Lua script over the row, the
// runner's lease, the event log, its head and the indexes (scripts/run-write-7.lua), so
// a guarded write (a runner's fenced save and event, an ending, a write unless
// ended) is as exact across replicas as the SQL stores' transactions, and a
// runs list or the recovery sweep reads the runs it answers, not every run.
// The row stays in keyv's layout ('{"value":{...}}' at runplane:runs:<run_id>),
// so rows written before are read and fenced alike, and indexed once (index).
import path from 'node:path';
import { RedisScript } from './redis-script.ts';
import type { RedisClient } from './redis-client.ts';
import { UNFINISHED, decodeCursor, encodeCursor, headPrefix, runText, viewOfRow, type RunKey, type RunPage, type RunQuery, type RunTable, type RunView } from './tables.ts';

/** Every Redis key of the state room starts so (keyv namespaces, AtomicOps). */
export const REDIS_PREFIX = 'runplane:';
/** The channel every run event is published on, whichever replica appends it. */
export const EVENTS_CHANNEL = 'runplane:events';

export const redisKeys = {
  /** keyv's key of a value in `namespace` */
  namespace: (ns: string) => `${REDIS_PREFIX}${ns}`,
  row: (runId: string) => `${REDIS_PREFIX}runs:${runId}`,
  /** the run's view, as the SQL tables' head column: versioned, written with the row */
  head: (runId: string) => `${REDIS_PREFIX}runs-head:${runId}`,
  /** an AtomicOps key (a claim, a lease) */
  kv: (key: string) => `${REDIS_PREFIX}kv:${key}`,
  seq: (runId: string) => `${REDIS_PREFIX}events-seq:${runId}`,
  events: (runId: string) => `${REDIS_PREFIX}events:${runId}`,
  /** a sorted set of '<created_at> <run_id>', all scores 0: lexical order is newest-first's reverse */
  byTenant: (tenantId: string) => `${REDIS_PREFIX}runs-by-tenant:${tenantId}`,
  unfinished: `${REDIS_PREFIX}runs-unfinished`,
  /** set once every row a store had before the indexes and heads is in them */
  indexed: `${REDIS_PREFIX}runs-indexed`,
};

const RUN_WRITE = new RedisScript(path.join(import.meta.dirname, 'scripts', 'run-write-7.lua'));
const UNFINISHED_ARG = [...UNFINISHED].join(',');

/** 'unended': no row yet, or an unfinished one. 'leased': an unfinished row, and the lease is the owner's. */
export type RunGuard = { kind: 'none' } | { kind: 'unended' } | { kind: 'leased'; leaseKey: string; owner: string };

export class RedisRunWrites {
  constructor(
    private readonly client: RedisClient,
    private readonly o: { maxEvents: number; eventTtlSeconds: number; runView: RunView },
  ) {}

  get runView(): RunView {
    return this.o.runView;
  }

  /**
   * Writes the run's row (when given) and appends its event (when given, a JSON
   * object without seq) in one step, only while `guard` holds. Null: refused,
   * nothing written; else the stored event's text ('{"seq":N,...}'), or '' when
   * there was no event.
   */
  async write(runId: string, tenantId: string, guard: RunGuard, o: { row?: RunKey; event?: string }): Promise<string | null> {
    const lease = guard.kind === 'leased' ? redisKeys.kv(guard.leaseKey) : redisKeys.kv(`runner:${runId}`);
    const keys = [redisKeys.row(runId), lease, redisKeys.seq(runId), redisKeys.events(runId), redisKeys.byTenant(tenantId), redisKeys.unfinished, redisKeys.head(runId)];
    const text = o.row && runText(o.row, this.o.runView);
    const reply = await RUN_WRITE.run(this.client, keys, [
      guard.kind,
      guard.kind === 'leased' ? guard.owner : '',
      text ? keyvText(text.body) : '',
      o.event ?? '',
      String(this.o.maxEvents),
      String(this.o.eventTtlSeconds),
      EVENTS_CHANNEL,
      UNFINISHED_ARG,
      o.row ? member(o.row) : '',
      o.row && UNFINISHED.has(o.row.status) ? '1' : '0',
      runId,
      text ? text.head : '',
    ]);
    if (reply === 0) return null;
    return reply === 1 ? '' : (reply as string);
  }
}

/** The row's JSON as keyv stores it (the backend's serializer is plain JSON; runs have no TTL). */
function keyvText(body: string): string {
  return `{"value":${body}}`;
}

function rowOf<T>(text: string | null): T | undefined {
  return text === null ? undefined : (JSON.parse(text) as { value: T }).value;
}

/** A run's member in its tenant's index: created_at is fixed-width ISO, so the lexical order is (created_at, run_id). */
function member(r: { created_at: string; run_id: string }): string {
  return `${r.created_at} ${r.run_id}`;
}

/** Rows a list reads at a time while it looks for a page of one status. */
const PAGE_CHUNK = 100;

/** The run table on Redis: rows in keyv's layout with their heads, written by the run-write script, listed through its indexes. */
export class RedisRunTable<T extends RunKey, V extends RunKey> implements RunTable<T, V> {
  private readonly runView: RunView<T, V>;
  private readonly prefix: string;

  constructor(
    private readonly client: RedisClient,
    private readonly writes: RedisRunWrites,
  ) {
    this.runView = writes.runView as unknown as RunView<T, V>;
    this.prefix = headPrefix(writes.runView);
  }

  async get(runId: string): Promise<T | undefined> {
    return rowOf<T>(await this.client.get(redisKeys.row(runId)));
  }

  /** From the head (a few hundred bytes); the row only when its head is missing or of another version. */
  async view(runId: string): Promise<V | undefined> {
    return (await this.views([runId]))[0];
  }

  private async views(runIds: string[]): Promise<Array<V | undefined>> {
    const heads = await this.client.mGet(runIds.map(redisKeys.head));
    return Promise.all(
      heads.map(async (head, i) => {
        if (typeof head === 'string' && head.startsWith(this.prefix)) return viewOfRow(this.runView, { head, body: null });
        const r = await this.get(runIds[i]!);
        return r && this.runView.of(r);
      }),
    );
  }

  async put(run: T): Promise<void> {
    await this.writes.write(run.run_id, run.tenant_id, { kind: 'none' }, { row: run });
  }

  async putUnlessEnded(run: T): Promise<boolean> {
    return (await this.writes.write(run.run_id, run.tenant_id, { kind: 'unended' }, { row: run })) !== null;
  }

  async putIfLeased(run: T, leaseKey: string, owner: string): Promise<boolean> {
    return (await this.writes.write(run.run_id, run.tenant_id, { kind: 'leased', leaseKey, owner }, { row: run })) !== null;
  }

  async page(tenantId: string, q: RunQuery): Promise<RunPage<V>> {
    const after = q.cursor ? decodeCursor(q.cursor) : undefined;
    const found: V[] = [];
    let max = after ? `(${member(after)}` : '+';
    // newest first from the cursor; with a status, chunk by chunk until a page and one more are found
    for (;;) {
      const want = q.status ? PAGE_CHUNK : q.limit + 1 - found.length;
      const members = await this.client.zRange(redisKeys.byTenant(tenantId), max, '-', { BY: 'LEX', REV: true, LIMIT: { offset: 0, count: want } });
      if (members.length === 0) break;
      for (const v of await this.views(members.map((m) => m.slice(m.indexOf(' ') + 1)))) {
        if (v && v.tenant_id === tenantId && (!q.status || v.status === q.status)) found.push(v);
      }
      if (found.length > q.limit || members.length < want) break;
      max = `(${members[members.length - 1]!}`;
    }
    const items = found.slice(0, q.limit);
    return { items, next_cursor: found.length > q.limit ? encodeCursor(items[items.length - 1]!) : null };
  }

  async unfinished(): Promise<T[]> {
    const ids = await this.client.sMembers(redisKeys.unfinished);
    if (ids.length === 0) return [];
    const rows = (await this.client.mGet(ids.map(redisKeys.row))).map((t) => rowOf<T>(t));
    return rows.filter((r): r is T => r !== undefined && UNFINISHED.has(r.status)).sort((a, b) => (a.created_at < b.created_at ? -1 : 1));
  }

  /**
   * Puts every row the store had before its indexes and heads into them, once
   * (the marker says it is done): rows are only written through the script
   * since, which keeps them itself. Safe beside writers and on two replicas at
   * once: a head is only set where none is (a script's is never older).
   */
  async index(): Promise<void> {
    if ((await this.client.get(redisKeys.indexed)) !== null) return;
    for await (const batch of this.client.scanIterator({ MATCH: `${redisKeys.row('')}*`, COUNT: 500 })) {
      const keys = Array.isArray(batch) ? batch : [batch];
      if (keys.length === 0) continue;
      const rows = (await this.client.mGet(keys)).map((t) => rowOf<T>(t));
      const m = this.client.multi();
      for (const r of rows) {
        if (!r) continue;
        m.zAdd(redisKeys.byTenant(r.tenant_id), { score: 0, value: member(r) });
        if (UNFINISHED.has(r.status)) m.sAdd(redisKeys.unfinished, r.run_id);
        m.set(redisKeys.head(r.run_id), runText(r, this.runView).head, { condition: 'NX' });
      }
      await m.exec();
    }
    await this.client.set(redisKeys.indexed, new Date().toISOString());
  }
}
