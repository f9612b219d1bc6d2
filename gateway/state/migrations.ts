// Schema migrations are numbered SQL files (NNN_name.sql) in one folder per
// database kind, applied in order at open and recorded in schema_migrations.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

const MIGRATION_FILE = /^(\d{3})_[a-z0-9_]+\.sql$/;

/** The numbered migrations in `dir`, in order. */
export function migrations(dir: string): Migration[] {
  return readdirSync(dir)
    .filter((f) => MIGRATION_FILE.test(f))
    .sort()
    .map((f) => ({ version: Number(MIGRATION_FILE.exec(f)![1]), name: f, sql: readFileSync(path.join(dir, f), 'utf8') }));
}
