// The state backend: the store of record (run rows, event logs, keyed stores,
// the webhook outbox) and the atomic operations limits hang on. Embedded
// default: one SQLite file in the data dir, so a restart loses nothing. With
// SERVICE_DATABASE_URL, PostgreSQL shared by every replica (Redis, when set,
// then only fans events out and dispatches runs). With SERVICE_REDIS_URL alone,
// Redis holds both. Memory: tests only (SERVICE_STATE=memory).
import path from 'node:path';
import { Keyv } from 'keyv';
import { MemoryAtomicOps, type AtomicOps } from './atomic.ts';
import { RedisAtomicOps } from './redis-atomic.ts';
import { isRedisConnectionError, pingRedis, pingWithin, redisClient, type DependencyCheck, type RedisClient } from './redis-client.ts';
import { openDb } from './sqlite/db.ts';
import { isPgConnectionError, openPool, type Pool } from './pg/db.ts';
import { PgAtomicOps } from './pg/atomic.ts';
import { PgEventTable, PgKeyedStore, PgOutbox, PgRunTable } from './pg/tables.ts';
import { SqliteAtomicOps } from './sqlite/atomic.ts';
import { SqliteEventTable, SqliteKeyedStore, SqliteRunTable } from './sqlite/tables.ts';
import { MemoryOutbox, SqliteOutbox, type Outbox } from './outbox.ts';
import { KEY_VIEW, UNFINISHED, pageOf, type EventTable, type KeyedStore, type RunKey, type RunTable, type RunView } from './tables.ts';
import { RedisRunTable, RedisRunWrites, redisKeys } from './redis-runs.ts';

export type { DependencyCheck };
export type { KeyedStore, RunTable } from './tables.ts';

export type StateKind = 'memory' | 'redis' | 'sqlite' | 'postgres';

export interface StateBackend {
  readonly kind: StateKind;
  readonly atomic: AtomicOps;
  /** A keyed store under `namespace`; writes throw on failure. */
  store<T>(namespace: string): KeyedStore<T>;
  /** The run rows (T) and their views (V: StateOptions.runView's). */
  runs<T extends RunKey, V extends RunKey = RunKey>(): RunTable<T, V>;
  /** Webhook deliveries waiting for their next attempt. */
  readonly outbox: Outbox;
  /** The event table, when the events live in the store of record (SQLite, PostgreSQL). */
  readonly eventTable?: EventTable;
  /**
   * The Redis command connection, when there is Redis: the event log publishes
   * on it too, so readiness checks the one connection requests wait on.
   */
  readonly redis?: RedisClient;
  /** Redis as the store of record (no database): the guarded writes of rows and events, one script each, which the event log appends through. */
  readonly runWrites?: RedisRunWrites;
  /** Each dependency this backend needs, checked now (readiness). None on the embedded default. */
  dependencies(): Promise<Record<string, DependencyCheck>>;
  close(): Promise<void>;
}

export interface StateOptions {
  redisUrl?: string;
  /** PostgreSQL, the shared store of record */
  databaseUrl?: string;
  /** the embedded store lives at <dataDir>/runplane.db */
  dataDir: string;
  kind?: 'memory' | 'sqlite';
  /** most events kept per run in the event table */
  maxEventsPerRun: number;
  /** What a status poll and a runs list read of a run (RunTable.view); its RunKey when not given. */
  runView?: RunView;
  /** how long a run's event log lives on Redis (Redis as the store of record), seconds; a week when not given */
  eventTtlSeconds?: number;
}

const EVENT_TTL_SECONDS = 7 * 24 * 3600;

// Plain JSON: keyv's default serializer (which also encodes Buffers) was the
// single hottest function of POST /v1/predict in bench/gateway.
const json = {
  serialize: (data: unknown) => JSON.stringify(data),
  deserialize: <V>(data: string) => JSON.parse(data) as V,
} as const;

/** Which dependency of the store `err` says could not be reached (down, restarting, refusing connections), or undefined: a bug or a refused statement. */
export function unreachableDependency(err: unknown): 'postgres' | 'redis' | undefined {
  if (isRedisConnectionError(err)) return 'redis';
  return isPgConnectionError(err) ? 'postgres' : undefined;
}

export async function openStateBackend(o: StateOptions): Promise<StateBackend> {
  if (o.databaseUrl) return openPgBackend(o.databaseUrl, o);
  if (o.redisUrl) return openRedisBackend(o.redisUrl, o);
  return o.kind === 'memory' ? openMemoryBackend(o) : openSqliteBackend(o);
}

/** A keyv store seen as a KeyedStore. */
function keyed<T>(kv: Keyv<T>): KeyedStore<T> {
  return {
    get: (key) => kv.get(key),
    set: async (key, value) => {
      await kv.set(key, value);
    },
    delete: (key) => kv.delete(key),
    async keys() {
      const names: string[] = [];
      if (kv.iterator) for await (const [key] of kv.iterator(undefined)) names.push(String(key));
      return names.sort();
    },
  };
}

/** Run rows in a keyed store (the memory store, tests): listing reads them all, and a guarded write is a check then a write. */
export function keyedRuns<T extends RunKey, V extends RunKey>(s: KeyedStore<T>, view: RunView<T, V>, lease: (key: string) => Promise<string | null>): RunTable<T, V> {
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
      const current = await s.get(run.run_id);
      if (current && !UNFINISHED.has(current.status)) return false;
      await s.set(run.run_id, run);
      return true;
    },
    async putIfLeased(run, leaseKey, owner) {
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

function memoize<T>(make: (namespace: string) => T): (namespace: string) => T {
  const made = new Map<string, T>();
  return (namespace) => {
    let s = made.get(namespace);
    if (!s) made.set(namespace, (s = make(namespace)));
    return s;
  };
}

function openMemoryBackend(o: StateOptions): StateBackend {
  // one Map per namespace already isolates keys; keyv's own prefixing would
  // break its iterator for namespaces that contain ':'
  const store = memoize((_ns) => keyed(new Keyv({ store: new Map(), throwOnErrors: true, ...json })));
  const atomic = new MemoryAtomicOps();
  return {
    kind: 'memory',
    atomic,
    outbox: new MemoryOutbox(),
    store: <T>(namespace: string) => store(namespace) as KeyedStore<T>,
    runs: <T extends RunKey, V extends RunKey>() => keyedRuns(store('runs') as KeyedStore<T>, (o.runView ?? KEY_VIEW) as unknown as RunView<T, V>, (k) => atomic.get(k)),
    async dependencies() {
      return {};
    },
    async close() {},
  };
}

function openSqliteBackend(o: StateOptions): StateBackend {
  const db = openDb(path.join(o.dataDir, 'runplane.db'));
  const atomic = new SqliteAtomicOps(db);
  atomic.sweep();
  const store = memoize((ns) => new SqliteKeyedStore<unknown>(db, ns));
  const runs = new SqliteRunTable<RunKey>(db, o.runView);
  return {
    kind: 'sqlite',
    atomic,
    outbox: new SqliteOutbox(db),
    store: <T>(namespace: string) => store(namespace) as KeyedStore<T>,
    runs: <T extends RunKey, V extends RunKey>() => runs as unknown as RunTable<T, V>,
    eventTable: new SqliteEventTable(db, o.maxEventsPerRun, o.runView),
    async dependencies() {
      return {};
    },
    async close() {
      if (db.open) db.close();
    },
  };
}

async function openPgBackend(url: string, o: StateOptions): Promise<StateBackend> {
  const pool: Pool = await openPool(url);
  const atomic = new PgAtomicOps(pool);
  await atomic.sweep();
  // readiness reports Redis too when the replicas use it for fan-out and dispatch
  const redis = o.redisUrl ? await redisClient(o.redisUrl) : undefined;
  await redis?.connect();
  const store = memoize((ns) => new PgKeyedStore<unknown>(pool, ns));
  const runs = new PgRunTable<RunKey>(pool, o.runView);
  return {
    kind: 'postgres',
    redis,
    atomic,
    outbox: new PgOutbox(pool),
    store: <T>(namespace: string) => store(namespace) as KeyedStore<T>,
    runs: <T extends RunKey, V extends RunKey>() => runs as unknown as RunTable<T, V>,
    eventTable: new PgEventTable(pool, o.maxEventsPerRun, o.runView),
    async dependencies() {
      return { postgres: await pingWithin(() => pool.query('SELECT 1'), (err) => (isPgConnectionError(err) ? 'not reachable' : 'query failed')), ...(redis ? { redis: await pingRedis(redis) } : {}) };
    },
    async close() {
      if (redis?.isOpen) await redis.close().catch(() => undefined);
      await pool.end().catch(() => undefined);
    },
  };
}

async function openRedisBackend(url: string, o: StateOptions): Promise<StateBackend> {
  const client: RedisClient = await redisClient(url);
  await client.connect();
  // only Redis as the store of record needs it (~0.2 s to load)
  const { default: KeyvRedis } = await import('@keyv/redis');
  const store = memoize((namespace) => {
    const adapter = new KeyvRedis(client as never, { namespace: redisKeys.namespace(namespace), keyPrefixSeparator: ':', throwOnErrors: true });
    return keyed(new Keyv({ store: adapter, namespace: redisKeys.namespace(namespace), useKeyPrefix: false, throwOnErrors: true, ...json }));
  });
  const atomic = new RedisAtomicOps(client);
  const runWrites = new RedisRunWrites(client, { maxEvents: o.maxEventsPerRun, eventTtlSeconds: o.eventTtlSeconds ?? EVENT_TTL_SECONDS, runView: o.runView ?? KEY_VIEW });
  const runs = new RedisRunTable<RunKey, RunKey>(client, runWrites);
  await runs.index();
  return {
    kind: 'redis',
    redis: client,
    atomic,
    // per replica until the shared store of record (PostgreSQL) lands: a restart of this replica loses its pending retries
    outbox: new MemoryOutbox(),
    store: <T>(namespace: string) => store(namespace) as KeyedStore<T>,
    runWrites,
    runs: <T extends RunKey, V extends RunKey>() => runs as unknown as RunTable<T, V>,
    async dependencies() {
      return { redis: await pingRedis(client) };
    },
    async close() {
      if (client.isOpen) await client.close();
    },
  };
}
