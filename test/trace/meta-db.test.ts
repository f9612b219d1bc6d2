// Issue 13: the ingest service's metadata in a database (SQLite in the data
// dir; PostgreSQL with RUNPLANE_TEST_STORE=postgres). GET /runs pages by an
// opaque cursor without duplicates or gaps while runs are added, never shows
// another tenant's runs, and answers hostile cursors and limits with 400
// {detail}; a user delete and a DSN revoke made by the operator CLI stay
// after a restart; a meta.json of an earlier version is imported once; and a
// service SIGKILLed mid-writes loses no run it acknowledged.
import { expect } from 'chai';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { hashKey, hashPassword, newDsnKey } from '../../plugins/trace-ingest/auth.ts';
import type { MetaData } from '../../plugins/trace-ingest/meta.ts';
import { IngestService } from '../../plugins/trace-ingest/service.ts';
import { body, metaDatabaseUrl, startIngest, type TestIngest } from '../support/ingest.ts';
import { tempDir } from '../support/trace.ts';
import { builtPath } from '../../shared/build.mjs';

const ROOT = path.resolve(import.meta.dirname, '../..');
const manifest = (runId: string) => ({ schema_version: '1.0.0', run_id: runId, debug_session_id: 'dbg_meta', client_name: 'c', status: 'running', started_at: new Date().toISOString(), capture_mode: 'trace' });
const postRun = (url: string, key: string, runId: string) =>
  fetch(`${url}/api/v1/runs`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(manifest(runId)) });

async function allPages(ing: TestIngest, cookie: string, limit: number, between?: (page: number) => Promise<void>): Promise<string[]> {
  const seen: string[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 100; page++) {
    const res = await ing.get(`/runs?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, cookie);
    expect(res.status).to.equal(200);
    const b = (await body(res)) as { runs: Array<{ run_id: string }>; next_cursor: string | null };
    expect(b.runs.length).to.be.at.most(limit);
    seen.push(...b.runs.map((r) => r.run_id));
    if (!b.next_cursor) return seen;
    cursor = b.next_cursor;
    await between?.(page);
  }
  throw new Error('paging did not end');
}

describe('trace ingest metadata database', function () {
  this.timeout(120_000);

  describe('GET /runs', () => {
    let ing: TestIngest;
    before(async () => {
      ing = await startIngest();
    });
    after(() => ing.close());

    it('pages newest first across pages with no duplicates or gaps while runs are added, and shows no other tenant', async () => {
      const a = await ing.tenant('page-a');
      const b = await ing.tenant('page-b');
      const before: string[] = [];
      for (let i = 0; i < 23; i++) {
        const id = `a-run-${String(i).padStart(2, '0')}`;
        expect((await postRun(ing.url, a.key, id)).status).to.equal(201);
        before.push(id);
        expect((await postRun(ing.url, b.key, `b-run-${i}`)).status).to.equal(201);
      }
      const cookie = await ing.login(a);
      const added: string[] = [];
      const seen = await allPages(ing, cookie, 5, async (page) => {
        // runs arriving (and old ones updated) while a client pages must not shift the pages
        const id = `a-late-${page}`;
        expect((await postRun(ing.url, a.key, id)).status).to.equal(201);
        added.push(id);
        expect((await postRun(ing.url, a.key, before[before.length - 1 - page]!)).status).to.equal(200);
      });
      expect(new Set(seen).size, 'no duplicates').to.equal(seen.length);
      expect(seen.filter((id) => !id.startsWith('a-late-')), 'every run there at the start, newest first').to.deep.equal([...before].reverse());
      expect(seen.some((id) => id.startsWith('b-'))).to.equal(false);
      expect(added.length).to.be.greaterThan(3);
      // the next listing starts with what arrived meanwhile
      const first = (await body(await ing.get('/runs?limit=3', cookie))) as { runs: Array<{ run_id: string }> };
      expect(first.runs.map((r) => r.run_id)).to.deep.equal([...added].reverse().slice(0, 3));

      // another tenant's run is 404 to read and to write, and never listed
      const cookieB = await ing.login(b);
      expect((await ing.get('/runs/a-run-00/manifest.json', cookieB)).status).to.equal(404);
      expect((await postRun(ing.url, b.key, 'a-run-00')).status).to.equal(404);
      const listedB = await allPages(ing, cookieB, 500);
      expect(listedB).to.have.length(23);
      expect(listedB.every((id) => id.startsWith('b-run-'))).to.equal(true);
    });

    it('answers hostile cursors and limits with 400 {detail}', async () => {
      const t = await ing.tenant('hostile-page');
      for (let i = 0; i < 3; i++) await postRun(ing.url, t.key, `h-${i}`);
      const cookie = await ing.login(t);
      const cursorOf = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
      const bad = [
        'limit=0', 'limit=-1', 'limit=501', 'limit=1e2', 'limit=abc', 'limit=99999999999999999999', 'limit=1.5', 'limit=%20', 'limit=0x10',
        'cursor=not-a-cursor!', 'cursor=' + 'A'.repeat(5000), `cursor=${cursorOf(['x', 'y'])}`, `cursor=${cursorOf({ created_at: '2026-01-01T00:00:00.000Z' })}`,
        `cursor=${cursorOf(['2026-01-01T00:00:00.000Z'])}`, `cursor=${cursorOf(['2026-01-01T00:00:00.000Z', 7])}`, `cursor=${cursorOf(["2026-01-01T00:00:00.000Z' OR 1=1 --", 'h-1'])}`,
        `cursor=${encodeURIComponent(Buffer.from('{"__proto__":1}').toString('base64'))}`, 'cursor=%00',
      ];
      for (const q of bad) {
        const res = await ing.get(`/runs?${q}`, cookie);
        expect(res.status, q).to.equal(400);
        expect((await body(res)).detail, q).to.be.a('string').and.match(/^(limit|cursor)/);
      }
      // a well-formed cursor from the far past or future is just a place in the order
      const future = await body(await ing.get(`/runs?cursor=${cursorOf(['2999-01-01T00:00:00.000Z', 'zzz'])}`, cookie));
      expect(future.runs.map((r: { run_id: string }) => r.run_id)).to.deep.equal(['h-2', 'h-1', 'h-0']);
      const past = await body(await ing.get(`/runs?cursor=${cursorOf(['2000-01-01T00:00:00.000Z', 'a'])}`, cookie));
      expect(past).to.deep.equal({ runs: [], next_cursor: null });
    });
  });

  it('a user deleted and a DSN revoked by the operator CLI stay so after a restart', async () => {
    const dir = await tempDir('meta-del-');
    let ing = await startIngest({ dataDir: dir });
    try {
      const t = await ing.tenant('del');
      const cookie = await ing.login(t);
      expect((await postRun(ing.url, t.key, 'del-1')).status).to.equal(201);
      const dsnId = ((await ing.json('/tenant/dsns', cookie)) as { dsns: Array<{ dsn_id: string }> }).dsns[0]!.dsn_id;
      const dbUrl = await metaDatabaseUrl(dir);
      const cli = (...args: string[]) =>
        promisify(execFile)(process.execPath, [builtPath('plugins/trace-ingest/cli.ts'), '--data-dir', dir, ...args], { cwd: ROOT, env: { ...process.env, TRACE_DATABASE_URL: dbUrl ?? '' } });
      await cli('user', 'delete', t.email);
      await cli('dsn', 'revoke', dsnId);
      // the running service sees both at its next call
      expect((await ing.get('/auth/me', cookie)).status).to.equal(401);
      expect((await postRun(ing.url, t.key, 'del-2')).status).to.equal(403);
      await ing.close();
      ing = await startIngest({ dataDir: dir });
      expect((await ing.get('/auth/me', cookie)).status).to.equal(401);
      const login = await fetch(`${ing.url}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: t.email, password: t.password }) });
      expect(login.status).to.equal(401);
      expect((await postRun(ing.url, t.key, 'del-3')).status).to.equal(403);
      expect(JSON.parse((await cli('user', 'list')).stdout)).to.deep.equal([]);
      const dsns = JSON.parse((await cli('dsn', 'list')).stdout) as Array<{ dsn_id: string; revoked_at: string | null }>;
      expect(dsns.find((d) => d.dsn_id === dsnId)?.revoked_at).to.be.a('string');
      let code = 0;
      await cli('user', 'delete', t.email).catch((err: { code: number }) => (code = err.code));
      expect(code, 'deleting again: no such user').to.equal(1);
    } finally {
      await ing.close();
    }
  });

  it('an admin deletes a user through the admin API: 401 for their cookie, also after a restart; 404 and 409 answer {detail}', async () => {
    const dir = await tempDir('meta-admin-del-');
    let ing = await startIngest({ dataDir: dir });
    try {
      const t = await ing.tenant('adm-del');
      const admin = await ing.tenant('adm-ops', { admin: true });
      const cookie = await ing.login(t);
      const adminCookie = await ing.login(admin);
      const me = (await ing.json('/auth/me', cookie)) as { user: { user_id: string } };
      const del = (c: string, id: string) => fetch(`${ing.url}/api/v1/admin/users/${encodeURIComponent(id)}`, { method: 'DELETE', headers: { cookie: c } });
      expect((await del(cookie, me.user.user_id)).status, 'not an admin').to.equal(403);
      const self = (await ing.json('/auth/me', adminCookie)) as { user: { user_id: string } };
      const refused = await del(adminCookie, self.user.user_id);
      expect(refused.status).to.equal(409);
      expect((await body(refused)).detail).to.be.a('string');
      const ok = await del(adminCookie, me.user.user_id);
      expect(ok.status).to.equal(200);
      expect(await body(ok)).to.include({ user_id: me.user.user_id, email: t.email }).and.not.have.property('password_hash');
      expect((await ing.get('/auth/me', cookie)).status).to.equal(401);
      for (const id of [me.user.user_id, 'usr_nope', '..', 'constructor']) {
        const gone = await del(adminCookie, id);
        expect(gone.status, id).to.equal(404);
        expect((await body(gone)).detail, id).to.be.a('string');
      }
      // the POST of before DELETE is gone; the OpenAPI document lists the DELETE
      expect((await fetch(`${ing.url}/api/v1/admin/users/${self.user.user_id}/delete`, { method: 'POST', headers: { cookie: adminCookie } })).status).to.equal(404);
      const doc = (await (await fetch(`${ing.url}/api/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
      expect(Object.keys(doc.paths['/admin/users/{user_id}'] ?? {})).to.deep.equal(['delete']);
      await ing.close();
      ing = await startIngest({ dataDir: dir });
      expect((await ing.get('/auth/me', cookie)).status).to.equal(401);
      expect(await ing.ingest.service.meta.userByEmail(t.email)).to.equal(undefined);
    } finally {
      await ing.close();
    }
  });

  it('imports the meta.json of an earlier version once, then renames it aside', async () => {
    const dir = await tempDir('meta-import-');
    const key = newDsnKey();
    const revokedKey = newDsnKey();
    const at = '2026-01-02T03:04:05.000Z';
    const legacy: MetaData = {
      version: 1,
      cookie_secret: 'legacy-secret-0123456789',
      tenants: { old: { tenant_id: 'old', name: 'Old', modelio_enabled: true, created_at: at } },
      users: { usr_old: { user_id: 'usr_old', email: 'old@old.test', password_hash: await hashPassword('old-password-123'), tenant_id: 'old', is_admin: false, created_at: at } },
      dsns: {
        dsn_old: { dsn_id: 'dsn_old', tenant_id: 'old', name: 'n', key_hash: hashKey(key), key_prefix: key.slice(0, 7), created_at: at, last_used_at: null, revoked_at: null },
        dsn_gone: { dsn_id: 'dsn_gone', tenant_id: 'old', name: 'r', key_hash: hashKey(revokedKey), key_prefix: revokedKey.slice(0, 7), created_at: at, last_used_at: null, revoked_at: at },
      },
      runs: { 'old-run': { run_id: 'old-run', tenant_id: 'old', created_at: at, updated_at: at, status: 'passed', client_name: 'c', debug_session_id: null, step_count: 2, parent_run_id: null, group_id: null, session_type: null, canonical: { '0': 's0' } } },
      commands: { 'old-run': [{ command_id: 'cmd_1', seq: 1, type: 'pause', payload: {}, operator_id: 'usr_old', issued_at: at }] },
      connections: {},
      preferences: [],
      revoked_sessions: { sid_dead: Math.floor(Date.now() / 1000) + 3600 },
    };
    await writeFile(path.join(dir, 'meta.json'), JSON.stringify(legacy));
    let ing = await startIngest({ dataDir: dir });
    try {
      const files = await readdir(dir);
      expect(files).to.not.include('meta.json');
      expect(files.some((f) => f.startsWith('meta.json.imported-'))).to.equal(true);
      expect(ing.ingest.service.cookieSecret, 'cookies issued before the upgrade stay valid').to.equal('legacy-secret-0123456789');
      const cookie = await ing.login({ email: 'old@old.test', password: 'old-password-123' });
      const runs = (await ing.json('/runs', cookie)) as { runs: Array<{ run_id: string; step_count: number; status: string }> };
      expect(runs.runs).to.have.length(1);
      expect(runs.runs[0]).to.include({ run_id: 'old-run', step_count: 2, status: 'passed' });
      expect((await postRun(ing.url, key, 'old-run')).status, 'the imported DSN works and the run is the tenant\'s').to.equal(200);
      expect((await postRun(ing.url, revokedKey, 'x')).status, 'an imported revoke stays').to.equal(403);
      const cmds = await fetch(`${ing.url}/api/v1/runs/old-run/commands?timeout=0`, { headers: { authorization: `Bearer ${key}` } });
      expect(((await body(cmds)) as { commands: Array<{ command_id: string }> }).commands.map((c) => c.command_id)).to.deep.equal(['cmd_1']);
      expect(await ing.ingest.service.meta.sessionRevoked('sid_dead')).to.equal(true);

      // once only: a deleted user does not come back even when the old file reappears
      await ing.ingest.service.deleteUser('old@old.test');
      await ing.close();
      await writeFile(path.join(dir, 'meta.json'), JSON.stringify(legacy));
      ing = await startIngest({ dataDir: dir });
      expect(await ing.ingest.service.meta.userByEmail('old@old.test')).to.equal(undefined);
      expect(await readdir(dir)).to.not.include('meta.json');
    } finally {
      await ing.close();
    }
  });

  it('keeps a run claimed again in its in-memory index while newer runs push older ones out', async () => {
    const dir = await tempDir('meta-lru-');
    const svc = await IngestService.open({ dataDir: dir, databaseUrl: await metaDatabaseUrl(dir), runCacheSize: 2 });
    try {
      await svc.createTenant('lru');
      const a = (await svc.claimRun('lru', 'run-a')).entry;
      const b = (await svc.claimRun('lru', 'run-b')).entry;
      expect((await svc.claimRun('lru', 'run-a')).entry).to.equal(a);
      // run-c pushes out the run claimed least recently: run-b, not run-a (claimed first, but again since)
      await svc.claimRun('lru', 'run-c');
      expect((await svc.claimRun('lru', 'run-a')).entry, 'a run still being written keeps its one entry object').to.equal(a);
      const again = await svc.claimRun('lru', 'run-b');
      expect(again.entry, 'run-b was dropped from memory').to.not.equal(b);
      expect(again.created, 'and read back from the database, not made anew').to.equal(false);
    } finally {
      await svc.close();
    }
  });

  it('a service SIGKILLed mid-writes keeps every run it acknowledged', async () => {
    const dir = await tempDir('meta-kill-');
    const dbUrl = await metaDatabaseUrl(dir);
    const setup = await IngestService.open({ dataDir: dir, databaseUrl: dbUrl });
    await setup.createTenant('kill');
    await setup.createUser('k@kill.test', 'kill-password-1', 'kill');
    const { key } = await setup.mintDsn('kill', 'k', 'http://127.0.0.1');
    await setup.close();

    const start = async (): Promise<{ child: ChildProcess; url: string }> => {
      const child = spawn(process.execPath, [builtPath('plugins/trace-ingest/main.ts')], {
        cwd: ROOT,
        env: { ...process.env, TRACE_DATA_DIR: dir, TRACE_INGEST_PORT: '0', TRACE_DATABASE_URL: dbUrl ?? '' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      const url = await new Promise<string>((resolve, reject) => {
        let err = '';
        child.stderr!.on('data', (c: Buffer) => {
          err += c.toString();
          const m = /listening on (http:\/\/\S+)/.exec(err);
          if (m) resolve(m[1]!);
        });
        child.once('exit', (code) => reject(new Error(`ingest exited ${code}: ${err}`)));
      });
      return { child, url };
    };

    const first = await start();
    const acked: string[] = [];
    let stop = false;
    // four writers at once, so the kill lands with writes in flight
    const writers = [0, 1, 2, 3].map(async (w) => {
      for (let i = 0; !stop; i++) {
        const id = `kill-${w}-${i}`;
        try {
          const res = await postRun(first.url, key, id);
          if (res.status === 201) acked.push(id);
        } catch {
          return;
        }
      }
    });
    while (acked.length < 40) await new Promise((r) => setTimeout(r, 20));
    first.child.kill('SIGKILL');
    await new Promise((r) => first.child.once('exit', r));
    stop = true;
    await Promise.all(writers);

    const second = await start();
    try {
      const login = await fetch(`${second.url}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'k@kill.test', password: 'kill-password-1' }) });
      expect(login.status).to.equal(200);
      const cookie = login.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
      const listed = (await (await fetch(`${second.url}/api/v1/runs?limit=500`, { headers: { cookie } })).json()) as { runs: Array<{ run_id: string }> };
      const ids = new Set(listed.runs.map((r) => r.run_id));
      expect(acked.filter((id) => !ids.has(id)), 'acknowledged runs missing after the kill').to.deep.equal([]);
      for (const id of acked.slice(-3)) {
        const res = await fetch(`${second.url}/api/v1/runs/${id}/manifest.json`, { headers: { cookie } });
        expect(res.status, id).to.equal(200);
      }
    } finally {
      second.child.kill('SIGTERM');
      await new Promise((r) => second.child.once('exit', r));
    }
  });
});
