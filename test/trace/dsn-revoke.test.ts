// DSN revoke: through the admin API (POST /admin/dsns/{dsn_id}/revoke) and
// through the operator CLI (`npm run ingest-admin -- dsn revoke <dsn_id>`, a
// separate process beside a running ingest on the same data dir). A revoked
// DSN is refused with 403 {detail}, by a real SDK session too; other DSNs go on.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { DebugSession } from '../../sdk/index.ts';
import { body, startIngest, type TestIngest } from '../support/ingest.ts';
import { collectingLogger, tempDir } from '../support/trace.ts';
import { builtPath } from '../../shared/build.mjs';

const ROOT = path.resolve(import.meta.dirname, '../..');

const manifest = (runId: string) => ({ schema_version: '1.0.0', run_id: runId, debug_session_id: 'dbg_revoke', client_name: 'c', status: 'running', started_at: new Date().toISOString(), capture_mode: 'trace' });

describe('trace ingest: DSN revoke', function () {
  this.timeout(60_000);
  let ing: TestIngest;
  before(async () => {
    ing = await startIngest();
  });
  after(() => ing.close());

  const postRun = (key: string, runId: string) =>
    fetch(`${ing.url}/api/v1/runs`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(manifest(runId)) });
  const dsnId = async (cookie: string, key: string): Promise<string> => {
    const list = (await ing.json('/tenant/dsns', cookie)) as { dsns: Array<{ dsn_id: string; key_prefix: string }> };
    const mine = list.dsns.filter((d) => key.startsWith(d.key_prefix));
    expect(mine).to.have.length(1);
    return mine[0]!.dsn_id;
  };

  it('an admin revokes a DSN: its key answers 403 from then on, revoked_at is listed, revoking again keeps it', async () => {
    const t = await ing.tenant('rev-api');
    const admin = await ing.tenant('rev-ops', { admin: true });
    const other = (await ing.ingest.service.mintDsn('rev-api', 'second', ing.url)).key;
    expect((await postRun(t.key, 'before-revoke')).status).to.equal(201);
    const userCookie = await ing.login(t);
    const id = await dsnId(userCookie, t.key);
    const revoke = (cookie: string, dsn = id) => fetch(`${ing.url}/api/v1/admin/dsns/${dsn}/revoke`, { method: 'POST', headers: { cookie } });

    // a tenant user is not an admin
    const refused = await revoke(userCookie);
    expect(refused.status).to.equal(403);
    expect((await postRun(t.key, 'still-allowed')).status).to.equal(201);

    const adminCookie = await ing.login(admin);
    const r = await revoke(adminCookie);
    expect(r.status).to.equal(200);
    const rec = await body(r);
    expect(rec.dsn_id).to.equal(id);
    expect(rec.revoked_at).to.be.a('string');
    expect(rec).not.to.have.property('key_hash');

    const after = await postRun(t.key, 'after-revoke');
    expect(after.status).to.equal(403);
    expect((await body(after)).detail).to.be.a('string');
    // the tenant's other DSN still works
    expect((await postRun(other, 'other-dsn')).status).to.equal(201);

    const again = await body(await revoke(adminCookie));
    expect(again.revoked_at).to.equal(rec.revoked_at);
    const listed = (await ing.json('/tenant/dsns', userCookie)) as { dsns: Array<{ dsn_id: string; revoked_at: string | null }> };
    expect(listed.dsns.find((d) => d.dsn_id === id)?.revoked_at).to.equal(rec.revoked_at);
    expect((await revoke(adminCookie, 'dsn_0000000000000000')).status).to.equal(404);
    expect((await revoke(adminCookie, 'x'.repeat(300))).status).to.equal(404);
    // the run written after the revoke is not there
    expect((await ing.get('/runs/after-revoke/manifest.json', userCookie)).status).to.equal(404);
    expect((await ing.get('/runs/before-revoke/manifest.json', userCookie)).status).to.equal(200);
  });

  it('the operator CLI revokes a DSN beside a running ingest, which refuses it within its metadata re-read; an SDK session with it stores nothing', async () => {
    const t = await ing.tenant('rev-cli');
    // the running service has seen (and cached) this key
    expect((await postRun(t.key, 'cli-before')).status).to.equal(201);
    const cookie = await ing.login(t);
    const id = await dsnId(cookie, t.key);

    const { stdout } = await promisify(execFile)(process.execPath, [builtPath('plugins/trace-ingest/cli.ts'), '--data-dir', ing.dir, 'dsn', 'revoke', id], { cwd: ROOT });
    const printed = JSON.parse(stdout) as { dsn_id: string; revoked_at: string | null };
    expect(printed.dsn_id).to.equal(id);
    expect(printed.revoked_at).to.be.a('string');

    let status = 0;
    for (let i = 0; i < 40 && status !== 403; i++) {
      await new Promise((r) => setTimeout(r, 100));
      status = (await postRun(t.key, 'cli-after')).status;
    }
    expect(status, 'refused within 4 s of the CLI revoke').to.equal(403);

    // a later write of the service's metadata keeps the revoke
    await ing.ingest.service.mintDsn('rev-cli', 'second', ing.url);
    await new Promise((r) => setTimeout(r, 300));
    expect((await postRun(t.key, 'cli-after-2')).status).to.equal(403);

    const log = collectingLogger();
    const s = new DebugSession({ runId: 'cli-sdk', clientName: 'runner', outDir: path.join(await tempDir(), 'b'), dsn: t.dsn, logger: log });
    s.recordStep({ step_index: 0, step_id: 's0', status: 'passed' });
    await s.close();
    expect((await ing.get('/runs/cli-sdk/manifest.json', cookie)).status).to.equal(404);
    expect((await ing.get('/runs/cli-before/manifest.json', cookie)).status).to.equal(200);
  });
});
