// Opens the metadata store a service or the operator CLI uses: PostgreSQL when
// a URL is given (TRACE_DATABASE_URL), else SQLite at <data dir>/meta.sqlite;
// then imports a meta.json left by an earlier version (import-json.ts).
import path from 'node:path';
import { openPostgres, openSqlite } from './db.ts';
import { importJsonOnce } from './import-json.ts';
import { MetaStore } from './store.ts';

export async function openMeta(dataDir: string, databaseUrl?: string): Promise<{ meta: MetaStore; imported: string | null }> {
  const db = databaseUrl ? await openPostgres(databaseUrl) : openSqlite(path.join(dataDir, 'meta.sqlite'));
  try {
    const imported = await importJsonOnce(db, path.join(dataDir, 'meta.json'));
    return { meta: new MetaStore(db), imported };
  } catch (err) {
    await db.close();
    throw err;
  }
}
