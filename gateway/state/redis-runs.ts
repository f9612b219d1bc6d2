// Run rows and run events on Redis (SERVICE_REDIS_URL without a database):
// every write a guard decides (a runner's fenced save and event, an ending, a
// write unless ended) is one Lua script over the row, the runner's lease and
// the event log (scripts/run-write-4.lua), so it is as exact across replicas
// as the SQL stores' transactions. The row stays in keyv's layout
// ('{"value":{...}}' at runplane:runs:<run_id>), so rows written before are
// read and fenced alike.
import path from 'node:path';
import { RedisScript } from './redis-script.ts';
import type { RedisClient } from './redis-client.ts';
import { UNFINISHED, pageOf, type KeyedStore, type RunKey, type RunTable, type RunView } from './tables.ts';

/** Every Redis key of the state room starts so (keyv namespaces, AtomicOps). */
export const REDIS_PREFIX = 'runplane:';
/** The channel every run event is published on, whichever replica appends it. */
export const EVENTS_CHANNEL = 'runplane:events';

export const redisKeys = {
  /** keyv's key of a value in `namespace` */
  namespace: (ns: string) => `${REDIS_PREFIX}${ns}`,
  row: (runId: string) => `${REDIS_PREFIX}runs:${runId}`,
  /** an AtomicOps key (a claim, a lease) */
  kv: (key: string) => `${REDIS_PREFIX}kv:${key}`,
  seq: (runId: string) => `${REDIS_PREFIX}events-seq:${runId}`,
  events: (runId: string) => `${REDIS_PREFIX}events:${runId}`,
};

const RUN_WRITE = new RedisScript(path.join(import.meta.dirname, 'scripts', 'run-write-4.lua'));
const UNFINISHED_ARG = [...UNFINISHED].join(',');

/** 'unended': no row yet, or an unfinished one. 'leased': an unfinished row, and the lease is the owner's. */
export type RunGuard = { kind: 'none' } | { kind: 'unended' } | { kind: 'leased'; leaseKey: string; owner: string };

export class RedisRunWrites {
  constructor(
    private readonly client: RedisClient,
    private readonly o: { maxEvents: number; eventTtlSeconds: number },
  ) {}

  /**
   * Writes the run's row (when given) and appends its event (when given, a JSON
   * object without seq) in one step, only while `guard` holds. Null: refused,
   * nothing written; else the stored event's text ('{"seq":N,...}'), or '' when
   * there was no event.
   */
  async write(runId: string, guard: RunGuard, o: { row?: RunKey; event?: string }): Promise<string | null> {
    const lease = guard.kind === 'leased' ? redisKeys.kv(guard.leaseKey) : redisKeys.kv(`runner:${runId}`);
    const reply = await RUN_WRITE.run(this.client, [redisKeys.row(runId), lease, redisKeys.seq(runId), redisKeys.events(runId)], [
      guard.kind,
      guard.kind === 'leased' ? guard.owner : '',
      o.row ? rowText(o.row) : '',
      o.event ?? '',
      String(this.o.maxEvents),
      String(this.o.eventTtlSeconds),
      EVENTS_CHANNEL,
      UNFINISHED_ARG,
    ]);
    if (reply === 0) return null;
    return reply === 1 ? '' : (reply as string);
  }
}

/** The row as keyv stores it (the backend's serializer is plain JSON; runs have no TTL). */
function rowText(run: RunKey): string {
  return `{"value":${JSON.stringify(run)}}`;
}

/**
 * Run rows in a keyed store, listed by reading them all (the memory store's
 * tests; on Redis the known cost of that mode). With `writes` (Redis) the
 * guarded writes are its scripts; without (memory, one process) a check then
 * a write.
 */
export function keyedRuns<T extends RunKey, V extends RunKey>(s: KeyedStore<T>, view: RunView<T, V>, lease: (key: string) => Promise<string | null>, writes?: RedisRunWrites): RunTable<T, V> {
  const all = async (): Promise<T[]> => {
    const rows: T[] = [];
    for (const k of await s.keys()) {
      const r = await s.get(k);
      if (r !== undefined) rows.push(r);
    }
    return rows;
  };
  return {
    get: (runId) => s.get(runId),
    view: (runId) => s.get(runId).then((r) => r && view.of(r)),
    put: (run) => s.set(run.run_id, run),
    async putUnlessEnded(run) {
      if (writes) return (await writes.write(run.run_id, { kind: 'unended' }, { row: run })) !== null;
      const current = await s.get(run.run_id);
      if (current && !UNFINISHED.has(current.status)) return false;
      await s.set(run.run_id, run);
      return true;
    },
    async putIfLeased(run, leaseKey, owner) {
      if (writes) return (await writes.write(run.run_id, { kind: 'leased', leaseKey, owner }, { row: run })) !== null;
      if ((await lease(leaseKey)) !== owner) return false;
      const current = await s.get(run.run_id);
      if (!current || !UNFINISHED.has(current.status)) return false;
      await s.set(run.run_id, run);
      return true;
    },
    async page(tenantId, q) {
      const p = pageOf(await all(), tenantId, q);
      return { items: p.items.map((r) => view.of(r)), next_cursor: p.next_cursor };
    },
    unfinished: async () => (await all()).filter((r) => UNFINISHED.has(r.status)).sort((a, b) => (a.created_at < b.created_at ? -1 : 1)),
  };
}
