// The two databases the trace metadata lives in, behind one small query
// interface: SQLite in the data dir (the default) or PostgreSQL
// (TRACE_DATABASE_URL). Queries are written once with $n placeholders; the
// SQLite side rewrites them to `?`. Migrations are numbered files as in the
// gateway's store of record, recorded in trace_schema_migrations so the trace
// tables can share a database with the gateway's.
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type pg from 'pg';
import { loadPg } from '../../../shared/load-once.ts';
import { whileBusy } from '../../../shared/sqlite-busy.ts';

export interface Sql {
  all<T>(sql: string, args?: unknown[]): Promise<T[]>;
  /** the number of rows the statement changed */
  run(sql: string, args?: unknown[]): Promise<number>;
}

export interface MetaDb extends Sql {
  readonly kind: 'sqlite' | 'postgres';
  tx<T>(fn: (q: Sql) => Promise<T>): Promise<T>;
  /**
   * `run`, group-committed: statements queued while the previous commit is on
   * its way go in the next transaction together, so N concurrent writes cost one
   * fsync (SQLite) or one COMMIT (PostgreSQL), not N. Resolves once committed;
   * when the transaction fails, each statement is tried alone, so one bad
   * statement fails only its own caller. Arguments given as a function are
   * read when the group is committed (a caller may fold later values in until then).
   */
  batch(sql: string, args?: BatchArgs): Promise<number>;
  close(): Promise<void>;
}

const MIGRATIONS = path.join(import.meta.dirname, 'migrations');
const MIGRATION_FILE = /^(\d{3})_[a-z0-9_]+\.sql$/;

/** The numbered migrations (NNN_name.sql) in `dir`, in order: the gateway's convention (a plugin may not import the gateway). */
function migrations(dir: string): Array<{ version: number; name: string; sql: string }> {
  return readdirSync(dir)
    .filter((f) => MIGRATION_FILE.test(f))
    .sort()
    .map((f) => ({ version: Number(MIGRATION_FILE.exec(f)![1]), name: f, sql: readFileSync(path.join(dir, f), 'utf8') }));
}
const VERSIONS = 'CREATE TABLE IF NOT EXISTS trace_schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)';
/** any constant other than the gateway's: the advisory lock trace migrations take */
const MIGRATION_LOCK = 7_013_512;

/** The `?` text of each `$n` statement and the argument each `?` takes (a statement's text is one of a few constants). */
const converted = new Map<string, { text: string; order: number[] }>();

/** `$1 ... $n` to positional `?`, the arguments reordered to match (a `$n` may repeat). */
function positional(sql: string, args: unknown[]): [string, unknown[]] {
  let c = converted.get(sql);
  if (!c) {
    const order: number[] = [];
    const text = sql.replace(/\$(\d+)/g, (_m, n: string) => {
      order.push(Number(n) - 1);
      return '?';
    });
    c = { text, order };
    if (converted.size < 1000) converted.set(sql, c);
  }
  return [c.text, c.order.map((i) => args[i])];
}

export type BatchArgs = unknown[] | (() => unknown[]);

interface Queued {
  sql: string;
  args: BatchArgs;
  resolve(n: number): void;
  reject(err: unknown): void;
}

/** The group commit behind MetaDb.batch: one commit in flight, the next batch gathering meanwhile. */
function groupCommitter(tx: <T>(fn: (q: Sql) => Promise<T>) => Promise<T>, single: (sql: string, args: unknown[]) => Promise<number>): (sql: string, args?: BatchArgs) => Promise<number> {
  let waiting: Queued[] = [];
  let busy = false;
  const flush = async (): Promise<void> => {
    while (waiting.length) {
      const group = waiting;
      waiting = [];
      const args = group.map((w) => (typeof w.args === 'function' ? w.args() : w.args));
      try {
        const counts = await tx(async (q) => {
          const out: number[] = [];
          for (const [i, w] of group.entries()) out.push(await q.run(w.sql, args[i]));
          return out;
        });
        group.forEach((w, i) => w.resolve(counts[i]!));
      } catch (err) {
        // a database that cannot serve fails them all at once (tried one by one, each would wait out the connect timeout)
        if (group.length === 1 || isDbUnavailable(err)) for (const w of group) w.reject(err);
        else for (const [i, w] of group.entries()) await single(w.sql, args[i]!).then(w.resolve, w.reject);
      }
    }
    busy = false;
  };
  return (sql, args = []) =>
    new Promise<number>((resolve, reject) => {
      waiting.push({ sql, args, resolve, reject });
      // the first caller of a quiet spell waits one turn of the event loop, so the callers of the same turn share its commit
      if (!busy) {
        busy = true;
        setImmediate(() => void flush());
      }
    });
}

export function openSqlite(file: string): MetaDb {
  mkdirSync(path.dirname(file), { recursive: true });
  const db = new Database(file, { timeout: 5000 });
  whileBusy(() => db.pragma('journal_mode = WAL'));
  // NORMAL in WAL: a commit is in the WAL before the answer, so a killed process loses
  // nothing acknowledged; power-loss durability (an fsync per commit, which blocks the
  // event loop here) is TRACE_FSYNC=1's, as for the bundle files this database indexes
  db.pragma(`synchronous = ${process.env.TRACE_FSYNC === '1' ? 'FULL' : 'NORMAL'}`);
  whileBusy(() => {
    db.exec(VERSIONS);
    const applied = new Set((db.prepare('SELECT version FROM trace_schema_migrations').all() as Array<{ version: number }>).map((r) => r.version));
    for (const m of migrations(path.join(MIGRATIONS, 'sqlite'))) {
      if (applied.has(m.version)) continue;
      db.transaction(() => {
        if (db.prepare('SELECT 1 FROM trace_schema_migrations WHERE version = ?').get(m.version)) return;
        db.exec(m.sql);
        db.prepare('INSERT INTO trace_schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, new Date().toISOString());
      }).immediate();
    }
  });
  // statements are prepared once: preparing costs more than running a small one
  const prepared = new Map<string, Database.Statement>();
  const statement = (text: string): Database.Statement => {
    let st = prepared.get(text);
    if (!st) {
      st = db.prepare(text);
      if (prepared.size < 500) prepared.set(text, st);
    }
    return st;
  };
  const direct: Sql = {
    all: async <T>(sql: string, args: unknown[] = []) => {
      const [text, a] = positional(sql, args);
      return statement(text).all(...a) as T[];
    },
    run: async (sql: string, args: unknown[] = []) => {
      const [text, a] = positional(sql, args);
      return statement(text).run(...a).changes;
    },
  };
  // one connection: a transaction's awaits must not let another caller's
  // statements into it (they would commit or roll back with it), so every use is serialized
  let chain: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const p = chain.then(fn);
    chain = p.catch(() => undefined);
    return p;
  };
  const run = (sql: string, args?: unknown[]) => serial(() => direct.run(sql, args));
  const tx = <T>(fn: (q: Sql) => Promise<T>): Promise<T> =>
    serial(async () => {
      db.exec('BEGIN IMMEDIATE');
      try {
        const out = await fn(direct);
        db.exec('COMMIT');
        return out;
      } catch (err) {
        db.exec('ROLLBACK');
        throw err;
      }
    });
  return {
    kind: 'sqlite',
    all: (sql, args) => serial(() => direct.all(sql, args)),
    run,
    tx,
    batch: groupCommitter(tx, run),
    close: () =>
      serial(async () => {
        db.close();
      }),
  };
}

export async function openPostgres(url: string): Promise<MetaDb> {
  const pool = new (await loadPg()).Pool({ connectionString: url, max: 10, connectionTimeoutMillis: 3000, idleTimeoutMillis: 30_000, query_timeout: 10_000 });
  pool.on('error', () => {
    /* an idle client lost its server: the pool replaces it; requests see their own errors */
  });
  pool.on('connect', (client) => client.on('error', () => undefined));
  const on = (c: pg.Pool | pg.PoolClient): Sql => ({
    all: async <T>(sql: string, args: unknown[] = []) => (await c.query(sql, args)).rows as T[],
    run: async (sql: string, args: unknown[] = []) => (await c.query(sql, args)).rowCount ?? 0,
  });
  const c = await pool.connect();
  try {
    await c.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await c.query(VERSIONS);
    const applied = new Set((await c.query<{ version: number }>('SELECT version FROM trace_schema_migrations')).rows.map((r) => r.version));
    for (const m of migrations(path.join(MIGRATIONS, 'pg'))) {
      if (applied.has(m.version)) continue;
      await c.query('BEGIN');
      try {
        await c.query(m.sql);
        await c.query('INSERT INTO trace_schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [m.version, m.name, new Date().toISOString()]);
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
  const base = on(pool);
  const tx = async <T>(fn: (q: Sql) => Promise<T>): Promise<T> => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const out = await fn(on(client));
      await client.query('COMMIT');
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  };
  return {
    kind: 'postgres',
    ...base,
    tx,
    batch: groupCommitter(tx, base.run),
    close: () => pool.end(),
  };
}

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'SQLITE_BUSY', 'SQLITE_LOCKED']);

/**
 * True when `err` says the metadata database cannot serve now (PostgreSQL
 * unreachable, shutting down or out of connections; SQLite locked past its
 * timeout), as opposed to a bug: the caller answers 503 with Retry-After.
 * The gateway's isPgConnectionError, which a plugin may not import.
 */
export function isDbUnavailable(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (CONNECTION_CODES.has(code)) return true;
      if (/^08/.test(code) || /^57P0[1-3]$/.test(code) || code === '53300') return true;
    }
    if (/Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Cannot use a pool after calling end/.test(e.message)) return true;
  }
  return false;
}
