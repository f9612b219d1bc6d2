// The store of record the tests' gateways run on. SQLite (the embedded
// default) unless RUNPLANE_TEST_STORE=postgres: then the same tests run on a
// throwaway PostgreSQL cluster (one per mocha process, or the one `npm test`
// started for all of them: RUNPLANE_TEST_PG_URL) and one database per data
// dir, so a gateway restarted on the same dir (a restart test) finds its state
// again. A test that names its own store (SERVICE_DATABASE_URL, SERVICE_STATE,
// or SERVICE_REDIS_URL alone: Redis as the store) keeps it. `npm test` runs the suite both ways.
import { createHash } from 'node:crypto';
import pg from 'pg';
import { startPostgres, type PgHandle } from './postgres.ts';

export const TEST_STORE: 'sqlite' | 'postgres' = process.env.RUNPLANE_TEST_STORE === 'postgres' ? 'postgres' : 'sqlite';

let cluster: Promise<PgHandle> | undefined;
const created = new Map<string, Promise<void>>();

/** The env that puts a gateway on the suite's store; {} on SQLite or when the test chose its store. */
export async function storeEnv(dataDir: string, env: Record<string, string | undefined> = {}): Promise<Record<string, string>> {
  if (TEST_STORE !== 'postgres' || env.SERVICE_DATABASE_URL || env.SERVICE_REDIS_URL || env.SERVICE_STATE) return {};
  cluster ??= process.env.RUNPLANE_TEST_PG_URL ? Promise.resolve(sharedCluster(process.env.RUNPLANE_TEST_PG_URL)) : startPostgres();
  const server = await cluster;
  const db = `gw_${createHash('sha256').update(dataDir).digest('hex').slice(0, 24)}`;
  if (!created.has(db)) {
    created.set(
      db,
      (async () => {
        const admin = new pg.Client({ connectionString: server.url });
        await admin.connect();
        try {
          // a copy of the migrated template `npm test` made, when there is one: the gateway finds its migrations applied
          const template = process.env.RUNPLANE_TEST_PG_TEMPLATE;
          await admin.query(`CREATE DATABASE ${db}${template && /^[a-z_]+$/.test(template) ? ` TEMPLATE ${template}` : ''}`);
        } finally {
          await admin.end();
        }
      })(),
    );
  }
  await created.get(db);
  return { SERVICE_DATABASE_URL: server.url.replace(/\/postgres$/, `/${db}`) };
}

// a cluster another process owns: never stopped from here
function sharedCluster(url: string): PgHandle {
  const refuse = () => Promise.reject(new Error('the shared test cluster is not this process\'s to stop'));
  return { url, port: Number(new URL(url).port), kill: refuse, start: refuse, stop: () => Promise.resolve() };
}

/** Root hooks (.mocharc.cjs requires this file): the cluster is stopped when the run ends. */
export const mochaHooks = {
  async afterAll(): Promise<void> {
    if (cluster) await (await cluster).stop();
  },
};
