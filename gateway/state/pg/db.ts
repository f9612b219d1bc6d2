// The shared store of record: PostgreSQL through a pg Pool. Migrations are
// applied at start under an advisory lock, so replicas starting together
// apply each once. Connection failures surface as errors the HTTP layer turns
// into 503 with Retry-After (isPgConnectionError).
import path from 'node:path';
import type pg from 'pg';
import { loadPg } from '../../../shared/load-once.ts';
import { migrations } from '../migrations.ts';

export type Pool = pg.Pool;

const MIGRATIONS_DIR = path.join(import.meta.dirname, 'migrations');
/** any constant: the advisory lock migrations take */
const MIGRATION_LOCK = 7_013_511;

export async function openPool(url: string): Promise<Pool> {
  const pool = new (await loadPg()).Pool({ connectionString: url, max: 10, connectionTimeoutMillis: 3000, idleTimeoutMillis: 30_000, query_timeout: 10_000 });
  pool.on('error', () => {
    /* an idle client lost its server: the pool replaces it; requests see their own errors */
  });
  // a client whose server goes away between two queries (a transaction, shutdown) must not crash the process:
  // the query in flight, if any, fails on its own
  pool.on('connect', (client) => client.on('error', () => undefined));
  await migrate(pool);
  return pool;
}

async function migrate(pool: Pool): Promise<void> {
  const c = await pool.connect();
  try {
    await c.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await c.query('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
    const applied = new Set((await c.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version));
    for (const m of migrations(MIGRATIONS_DIR)) {
      if (applied.has(m.version)) continue;
      await c.query('BEGIN');
      try {
        await c.query(m.sql);
        await c.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [m.version, m.name, new Date().toISOString()]);
        await c.query('COMMIT');
      } catch (err) {
        await c.query('ROLLBACK');
        throw err;
      }
    }
  } finally {
    await c.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    c.release();
  }
}

/** Runs `fn` in one transaction on one client. */
export async function tx<T>(pool: Pool, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    const out = await fn(c);
    await c.query('COMMIT');
    return out;
  } catch (err) {
    await c.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    c.release();
  }
}

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH']);

/**
 * True when `err` says PostgreSQL could not be reached or cannot serve now
 * (connection refused or lost, a server shutting down or starting up, too many
 * connections), as opposed to a bug or a refused statement.
 */
export function isPgConnectionError(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (CONNECTION_CODES.has(code)) return true;
      // 08: connection exception; 57P01-57P03: admin shutdown, crash shutdown, cannot connect now; 53300: too many connections
      if (/^08/.test(code) || /^57P0[1-3]$/.test(code) || code === '53300') return true;
    }
    if (/Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error/.test(e.message)) return true;
  }
  return false;
}
