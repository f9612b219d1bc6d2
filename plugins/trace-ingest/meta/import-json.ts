// Earlier versions kept the metadata in <data dir>/meta.json. At start that
// file is imported into the database once (one transaction; rows that exist
// already are kept), the import is marked in trace_settings, and the file is
// renamed aside, so nothing recorded before is lost and a later start (or a
// crash between the commit and the rename) never imports it again: a user
// deleted or a DSN revoked since stays so.
import { readFile, rename } from 'node:fs/promises';
import type { MetaData } from '../meta.ts';
import type { MetaDb } from './db.ts';
import { insertCommand, insertDsn, insertPreference, insertRun, insertTenant, insertUser, revokeSession, upsertConnection } from './store.ts';

const MARK = 'json_imported_at';

/** Imports `file` when present and not imported before; returns where it was moved, or null. */
export async function importJsonOnce(db: MetaDb, file: string): Promise<string | null> {
  const text = await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (text === null) return null;
  const data = JSON.parse(text) as Partial<MetaData>;
  await db.tx(async (q) => {
    if ((await q.all('SELECT 1 FROM trace_settings WHERE key = $1', [MARK])).length) return;
    // the imported secret keeps the cookies issued before the upgrade valid
    if (data.cookie_secret) await q.run('INSERT INTO trace_settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value', ['cookie_secret', data.cookie_secret]);
    for (const t of Object.values(data.tenants ?? {})) await insertTenant(q, t);
    for (const u of Object.values(data.users ?? {})) await insertUser(q, u);
    for (const d of Object.values(data.dsns ?? {})) await insertDsn(q, d);
    for (const r of Object.values(data.runs ?? {})) await insertRun(q, { ...r, canonical: r.canonical ?? {} });
    for (const [runId, list] of Object.entries(data.commands ?? {})) for (const c of list) await insertCommand(q, runId, c);
    for (const c of Object.values(data.connections ?? {})) await upsertConnection(q, c);
    for (const p of data.preferences ?? []) await insertPreference(q, p);
    const now = Date.now() / 1000;
    for (const [sid, exp] of Object.entries(data.revoked_sessions ?? {})) if (exp > now) await revokeSession(q, sid, exp);
    await q.run('INSERT INTO trace_settings (key, value) VALUES ($1, $2)', [MARK, new Date().toISOString()]);
  });
  const aside = `${file}.imported-${new Date().toISOString().replace(/[:.]/g, '-')}`;
  await rename(file, aside);
  return aside;
}
