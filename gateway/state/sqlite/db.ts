// The embedded store of record: one SQLite file in the data dir, in WAL mode so
// readers never wait for the writer, with numbered migrations applied at open.
// Every write is a committed transaction before the caller is answered.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { migrations } from '../migrations.ts';
import { whileBusy } from '../../../shared/sqlite-busy.ts';

export type Db = Database.Database;

const MIGRATIONS_DIR = path.join(import.meta.dirname, 'migrations');

/** Opens (creating it if needed) the database at `file` and brings its schema up to date. */
export function openDb(file: string): Db {
  mkdirSync(path.dirname(file), { recursive: true });
  const db = new Database(file, { timeout: 5000 });
  whileBusy(() => db.pragma('journal_mode = WAL'));
  // FULL: a commit is on disk (WAL fsynced) before the caller is answered, so an
  // accepted run survives a power cut too, not only a crash of this process
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  whileBusy(() => migrate(db));
  return db;
}

function migrate(db: Db): void {
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
  const applied = new Set((db.prepare('SELECT version FROM schema_migrations').all() as Array<{ version: number }>).map((r) => r.version));
  const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
  for (const m of migrations(MIGRATIONS_DIR)) {
    if (applied.has(m.version)) continue;
    // IMMEDIATE: two gateways opening one file at once apply each migration once
    db.transaction(() => {
      const again = db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').get(m.version);
      if (again) return;
      db.exec(m.sql);
      record.run(m.version, m.name, new Date().toISOString());
    }).immediate();
  }
}
