import { expect } from 'chai';
import { execFile } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { promisify } from 'node:util';
import { DebugSession } from '../../sdk/index.ts';
import { sleep } from '../../shared/abort.ts';
import { body, startIngest, type TestIngest, type TestTenant } from '../support/ingest.ts';
import { collectingLogger, png, tempDir } from '../support/trace.ts';
import { builtPath } from '../../shared/build.mjs';

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');

async function call(ing: TestIngest, method: string, p: string, opts: { key?: string; cookie?: string; json?: unknown; raw?: string | Buffer; type?: string } = {}) {
  const headers: Record<string, string> = {};
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  if (opts.cookie) headers.cookie = opts.cookie;
  let payload: string | Buffer | undefined;
  if (opts.json !== undefined) {
    payload = JSON.stringify(opts.json);
    headers['content-type'] = 'application/json';
  }
  if (opts.raw !== undefined) payload = opts.raw;
  if (opts.type) headers['content-type'] = opts.type;
  const res = await fetch(`${ing.url}/api/v1${p}`, { method, headers, body: payload });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed as any, text }; // eslint-disable-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON
}

async function recordRun(t: TestTenant, runId: string): Promise<void> {
  const s = new DebugSession({ runId, clientName: 'c', outDir: path.join(await tempDir(), 'b'), dsn: t.dsn, logger: collectingLogger() });
  s.recordStep({ step_index: 0, step_id: 'x', status: 'passed' });
  await s.attachObservation(0, 'pre', await png(3));
  await s.close();
}

describe('trace ingest service', () => {
  let ing: TestIngest;
  let a: TestTenant;
  let b: TestTenant;
  let admin: TestTenant;
  before(async () => {
    ing = await startIngest({ maxBodyBytes: 64 * 1024, loginMaxFailures: 5 });
    a = await ing.tenant('alpha');
    b = await ing.tenant('beta');
    admin = await ing.tenant('ops', { admin: true });
    await recordRun(a, 'run-a');
    await recordRun(b, 'run-b');
  });
  after(() => ing.close());

  it('isolates tenants: A never reads or writes B\'s run (404), by cookie or by DSN', async () => {
    const ca = await ing.login(a);
    expect((await ing.get('/runs/run-a/trace.json', ca)).status).to.equal(200);
    for (const p of ['/runs/run-b/trace.json', '/runs/run-b/manifest.json', '/runs/run-b/steps/0000.json', '/runs/run-b/screenshots/0000_pre.png', '/runs/run-b/files', '/runs/run-b/reward']) {
      const r = await call(ing, 'GET', p, { cookie: ca });
      expect(r.status, p).to.equal(404);
      expect(r.body.detail, p).to.be.a('string');
    }
    const runs = await ing.json('/runs', ca);
    expect(runs.runs.map((r: { run_id: string }) => r.run_id)).to.deep.equal(['run-a']);
    const w = await call(ing, 'PUT', '/runs/run-b/steps/0', { key: a.key, json: { step_index: 0, step_id: 'evil' } });
    expect(w.status).to.equal(404);
    expect((await call(ing, 'POST', '/runs', { key: a.key, json: { run_id: 'run-b', debug_session_id: 'd', client_name: 'c', started_at: new Date().toISOString() } })).status).to.equal(404);
    expect((await call(ing, 'POST', '/runs/run-b/commands', { cookie: ca, json: { type: 'kill' } })).status).to.equal(404);
    expect((await call(ing, 'GET', '/runs/run-b/commands?timeout=0', { key: a.key })).status).to.equal(404);
    const batch = await call(ing, 'POST', '/batch', { key: a.key, json: { requests: [{ method: 'PUT', path: '/runs/run-b/costs', body: { total_usd: 1 } }] } });
    expect(batch.status).to.equal(207);
    expect(batch.body.results[0].status).to.equal(404);
    const cb = await ing.login(b);
    expect((await ing.json('/runs/run-b/steps/0000.json', cb)).step_id).to.equal('x');
  });

  it('impersonation: only an admin sets trace_tenant_override; /auth/me reports it', async () => {
    const ca = await ing.login(a);
    expect((await call(ing, 'POST', '/admin/impersonate', { cookie: ca, json: { tenant_id: 'beta' } })).status).to.equal(403);
    expect((await call(ing, 'GET', '/admin/tenants', { cookie: ca })).status).to.equal(403);
    const cadmin = await ing.login(admin);
    const tenants = await call(ing, 'GET', '/admin/tenants', { cookie: cadmin });
    expect(tenants.body.tenants.map((t: { tenant_id: string }) => t.tenant_id)).to.include.members(['alpha', 'beta', 'ops']);
    expect((await call(ing, 'GET', '/runs/run-b/trace.json', { cookie: cadmin })).status).to.equal(404);
    const imp = await fetch(`${ing.url}/api/v1/admin/impersonate`, { method: 'POST', headers: { cookie: cadmin, 'content-type': 'application/json' }, body: JSON.stringify({ tenant_id: 'beta' }) });
    expect(imp.status).to.equal(200);
    const setCookie = imp.headers.getSetCookie().find((c) => c.startsWith('trace_tenant_override='))!;
    expect(setCookie).to.match(/HttpOnly/).and.match(/SameSite=Lax/);
    const both = `${cadmin}; ${setCookie.split(';')[0]}`;
    expect((await call(ing, 'GET', '/runs/run-b/trace.json', { cookie: both })).status).to.equal(200);
    const me = await call(ing, 'GET', '/auth/me', { cookie: both });
    expect(me.body.impersonating).to.equal(true);
    expect(me.body.tenant.tenant_id).to.equal('beta');
    expect(me.body.home_tenant.tenant_id).to.equal('ops');
    expect(me.body.user.email).to.equal(admin.email);
    // the admin's override cookie in a non-admin's jar changes nothing
    const forged = `${ca}; ${setCookie.split(';')[0]}`;
    expect((await call(ing, 'GET', '/runs/run-b/trace.json', { cookie: forged })).status).to.equal(404);
    expect((await call(ing, 'GET', '/auth/me', { cookie: forged })).body.impersonating).to.equal(false);
    expect((await call(ing, 'POST', '/admin/impersonate', { cookie: cadmin, json: { tenant_id: 'nope' } })).status).to.equal(404);
  });

  it('session cookie: signed, HttpOnly, SameSite=Lax, with an expiry; logout clears; a tampered cookie is 401', async () => {
    const res = await fetch(`${ing.url}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: a.email, password: a.password }) });
    const c = res.headers.getSetCookie()[0]!;
    expect(c).to.match(/^trace_session=[^;]+; Path=\/api\/v1; Max-Age=43200; HttpOnly; SameSite=Lax$/);
    const value = c.split(';')[0]!;
    const [name, v] = value.split('=');
    const tampered = `${name}=${v!.slice(0, -2)}xx`;
    expect((await call(ing, 'GET', '/auth/me', { cookie: tampered })).status).to.equal(401);
    expect((await call(ing, 'GET', '/runs', {})).status).to.equal(401);
    expect((await call(ing, 'GET', '/connections', {})).status).to.equal(401);
    const out = await fetch(`${ing.url}/api/v1/auth/logout`, { method: 'POST', headers: { cookie: value } });
    expect(out.headers.getSetCookie()[0]).to.match(/^trace_session=; .*Max-Age=0/);
  });

  it('login is rate-limited against guessing (429 with Retry-After)', async () => {
    const t = await ing.tenant('guess');
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await call(ing, 'POST', '/auth/login', { json: { email: t.email, password: `wrong-${i}` } })).status);
    expect(statuses.slice(0, 5)).to.deep.equal([401, 401, 401, 401, 401]);
    expect(statuses[5]).to.equal(429);
    const locked = await call(ing, 'POST', '/auth/login', { json: { email: t.email, password: t.password } });
    expect(locked.status).to.equal(429);
    expect(Number(locked.headers.get('retry-after'))).to.be.greaterThan(0);
  });

  it('DSNs: minted through /tenant/dsns with the key shown once, hashed at rest; unknown key 403, none 401', async () => {
    const ca = await ing.login(a);
    const minted = await call(ing, 'POST', '/tenant/dsns', { cookie: ca, json: { name: 'ci' } });
    expect(minted.status).to.equal(201);
    expect(minted.body.key).to.match(/^tk_/);
    expect(minted.body.dsn).to.equal(`http://${minted.body.key}@127.0.0.1:${new URL(ing.url).port}`);
    const list = await call(ing, 'GET', '/tenant/dsns', { cookie: ca });
    expect(list.text).to.not.include(minted.body.key);
    expect(list.text).to.not.include('key_hash');
    expect(list.body.dsns.map((d: { name: string }) => d.name)).to.include('ci');
    const stored = JSON.stringify(await ing.ingest.service.meta.dsns());
    expect(stored).to.not.include(minted.body.key);
    const hb = { client_id: 'cli-1', client_name: 'probe', capture_mode: 'trace' };
    expect((await call(ing, 'POST', '/heartbeat', { key: minted.body.key, json: hb })).status).to.equal(202);
    expect((await call(ing, 'POST', '/heartbeat', { key: 'tk_nope', json: hb })).status).to.equal(403);
    const none = await call(ing, 'POST', '/heartbeat', { json: hb });
    expect(none.status).to.equal(401);
    expect(none.body.detail).to.match(/Bearer/);
    const conns = await ing.json('/connections', ca);
    expect(conns.connections.map((c: { client_id: string }) => c.client_id)).to.include('cli-1');
    const cb = await ing.login(b);
    expect((await ing.json('/connections', cb)).connections.map((c: { client_id: string }) => c.client_id)).to.not.include('cli-1');
  });

  it('hostile inputs answer {detail} with 400/413/415/422, never 500', async () => {
    const cases: Array<[string, string, Parameters<typeof call>[3], number]> = [
      ['PUT', '/runs/h1/steps/0', { key: a.key, raw: '{"step_index": 0,', type: 'application/json' }, 400],
      ['PUT', '/runs/h1/steps/0', { key: a.key, raw: '{"__proto__": {"x": 1}}', type: 'application/json' }, 400],
      ['PUT', '/runs/h1/steps/0', { key: a.key, raw: `{"a":${'['.repeat(500)}${']'.repeat(500)}}`, type: 'application/json' }, 400],
      ['PUT', '/runs/h1/steps/0', { key: a.key, raw: Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), type: 'application/json' }, 400],
      ['PUT', '/runs/h1/steps/0', { key: a.key, raw: 'step_index=0', type: 'application/x-www-form-urlencoded' }, 415],
      ['PUT', '/runs/h1/steps/0', { key: a.key, raw: '{}', type: 'application/json; charset=latin1' }, 415],
      ['PUT', '/runs/h1/steps/0', { key: a.key, raw: JSON.stringify({ step_index: 0, step_id: 'x', pad: 'x'.repeat(70 * 1024) }), type: 'application/json' }, 413],
      ['PUT', '/runs/h1/steps/0', { key: a.key, json: { step_index: 'zero', step_id: 'x' } }, 422],
      ['PUT', '/runs/h1/steps/1', { key: a.key, json: { step_index: 0, step_id: 'x' } }, 422],
      ['PUT', '/runs/h1/steps/abc', { key: a.key, json: { step_index: 0, step_id: 'x' } }, 400],
      ['POST', '/runs/h1/events', { key: a.key, json: { events: [{ layer: 'astrology', kind: 'note' }] } }, 422],
      ['POST', '/runs/h1/events', { key: a.key, json: [] }, 422],
      ['POST', '/runs/h1/modelio/../../x.json', { key: a.key, json: {} }, 404],
      ['POST', '/runs/h1/modelio/0001-planner-0.json', { key: a.key, json: { layer: 'planner', request: {}, response: {} } }, 422],
      ['POST', '/runs/h1/logs', { key: a.key, json: { text: 'x', name: '../etc' } }, 422],
      ['POST', '/runs/h1/screenshots/0/pre', { key: a.key, json: {} }, 415],
      ['POST', '/runs/h1/screenshots/0/selfie', { key: a.key, raw: '--zz\r\nContent-Disposition: form-data; name="image"; filename="x.png"\r\nContent-Type: image/png\r\n\r\nabc\r\n--zz--\r\n', type: 'multipart/form-data; boundary=zz' }, 400],
      ['POST', '/runs/h1/screenshots/0/pre', { key: a.key, raw: '--zz\r\nContent-Disposition: form-data; name="image"; filename="x.png"\r\nContent-Type: image/png\r\n\r\nabc\r\n--zz--\r\n', type: 'multipart/form-data; boundary=zz' }, 415],
      ['POST', '/runs/h1/screenshots/0/pre', { key: a.key, raw: '--zz\r\nno end', type: 'multipart/form-data; boundary=zz' }, 400],
      ['PUT', '/runs/h1/costs', { key: a.key, json: { total_usd: -1 } }, 422],
      ['POST', '/batch', { key: a.key, json: { requests: 'all' } }, 422],
      ['GET', '/runs/h1/nothing-here', { key: a.key }, 404],
      ['DELETE', '/runs', { key: a.key }, 405],
      ['POST', '/auth/login', { raw: 'email=x', type: 'text/plain' }, 415],
      ['GET', '/runs/%E0%A4%A/trace.json', { cookie: 'x=y' }, 400],
    ];
    for (const [method, p, opts, status] of cases) {
      const r = await call(ing, method, p, opts);
      expect(r.status, `${method} ${p} ${r.text.slice(0, 100)}`).to.equal(status);
      expect(r.body?.detail, `${method} ${p}`).to.be.a('string');
    }
  });

  it('screenshots: 415 when the bytes are not a PNG even with an image/png part; stored bytes read back identical', async () => {
    const form = (data: Buffer, type = 'image/png') => {
      const f = new FormData();
      f.append('image', new Blob([data], { type }), 'x.png');
      return f;
    };
    const post = (f: FormData) => fetch(`${ing.url}/api/v1/runs/shots/screenshots/2/post`, { method: 'POST', headers: { authorization: `Bearer ${a.key}` }, body: f });
    const fake = await post(form(Buffer.from('GIF89a not a png at all, really not')));
    expect(fake.status).to.equal(415);
    expect((await body(fake)).detail).to.match(/not a PNG/);
    expect((await post(form(await png(1), 'image/jpeg'))).status).to.equal(415);
    const real = await png(9);
    expect((await post(form(real))).status).to.equal(202);
    const ca = await ing.login(a);
    const back = await ing.get('/runs/shots/screenshots/0002_post.png', ca);
    expect(Buffer.from(await back.arrayBuffer()).equals(real)).to.equal(true);
  });

  it('the batch route answers per record (207): stored ones and the ones that failed validation, with why', async () => {
    const r = await call(ing, 'POST', '/batch', {
      key: a.key,
      json: {
        requests: [
          { method: 'PUT', path: '/runs/batch-1/steps/0', body: { step_index: 0, step_id: 's0' } },
          { method: 'PUT', path: '/runs/batch-1/steps/1', body: { step_index: 1, step_id: 's1', status: 'exploded' } },
          { method: 'POST', path: '/runs/batch-1/events', body: { events: [{ layer: 'planner', kind: 'note' }], step_index: 0 } },
          { method: 'GET', path: '/runs/batch-1/commands', body: null },
          { method: 'PUT', path: '/runs/batch-1/costs', body: { total_usd: 0.5 } },
        ],
      },
    });
    expect(r.status).to.equal(207);
    expect(r.body.results.map((x: { status: number }) => x.status)).to.deep.equal([200, 422, 202, 404, 200]);
    expect(r.body.results[1].detail).to.match(/status/);
    const ca = await ing.login(a);
    expect((await ing.get('/runs/batch-1/steps/0000.json', ca)).status).to.equal(200);
    expect((await ing.get('/runs/batch-1/steps/0001.json', ca)).status).to.equal(404);
    expect((await (await ing.get('/runs/batch-1/events/0000.jsonl', ca)).text()).trim().split('\n')).to.have.length(1);
  });

  it('serves /healthz, /api/v1/healthz, OpenAPI, /docs, /redoc and the queue-depth metric without credentials', async () => {
    expect(await (await fetch(`${ing.url}/healthz`)).json()).to.deep.include({ status: 'ok' });
    expect((await fetch(`${ing.url}/api/v1/healthz`)).status).to.equal(200);
    const doc = await (await fetch(`${ing.url}/api/v1/openapi.json`)).json() as { openapi: string; paths: Record<string, Record<string, unknown>>; components: { schemas: Record<string, unknown> } };
    expect(doc.openapi).to.equal('3.1.0');
    for (const p of ['/runs', '/runs/{run_id}/steps/{step_index}', '/runs/{run_id}/screenshots/{step_index}/{kind}', '/heartbeat', '/runs/{run_id}/commands', '/auth/login', '/auth/me', '/connections', '/tenant/dsns', '/admin/tenants', '/admin/impersonate', '/batch']) {
      expect(doc.paths, p).to.have.property(p);
    }
    expect(doc.components.schemas).to.include.keys('StepRecord', 'Manifest', 'Costs', 'Verdict');
    expect(JSON.stringify(doc)).to.not.match(/"\$ref":"(?!#\/components\/schemas\/)/);
    const docs = await fetch(`${ing.url}/api/v1/docs`);
    expect(await docs.text()).to.include('swagger-ui-bundle.js');
    expect((await fetch(`${ing.url}/api/v1/docs/assets/swagger-ui-bundle.js`)).status).to.equal(200);
    expect(await (await fetch(`${ing.url}/api/v1/redoc`)).text()).to.include('redoc.standalone.js');
    expect((await fetch(`${ing.url}/api/v1/docs/assets/redoc.standalone.js`)).status).to.equal(200);
    expect((await fetch(`${ing.url}/api/v1/docs/assets/__proto__`)).status).to.equal(404);
    expect(await (await fetch(`${ing.url}/api/v1/metrics`)).text()).to.match(/^trace_ingest_queue_depth \d+$/m);
  });

  it('preferences and reward routes', async () => {
    await recordRun(a, 'run-a2');
    const ca = await ing.login(a);
    const p = await call(ing, 'POST', '/preferences', { cookie: ca, json: { run_id_a: 'run-a', run_id_b: 'run-a2', preferred: 'b', rationale: 'fewer steps' } });
    expect(p.status).to.equal(201);
    expect((await call(ing, 'POST', '/preferences', { cookie: ca, json: { run_id_a: 'run-a', run_id_b: 'run-b', preferred: 'a' } })).status).to.equal(404);
    const list = await ing.json('/preferences?run_id=run-a2', ca);
    expect(list.preferences.map((x: { preference_id: string }) => x.preference_id)).to.deep.equal([p.body.preference_id]);
    const reward = await ing.json('/runs/run-a/reward', ca);
    expect(reward).to.include({ run_id: 'run-a', source: 'none', reward: null });
  });
});

describe('trace ingest service: queue, restart, CLI', () => {
  it('a command poll ends when its client hangs up, and a poll answered in full is not aborted after', async () => {
    const ing = await startIngest();
    try {
      const t = await ing.tenant('poll');
      const waiting = () => (ing.ingest.service as unknown as { waiters: Map<string, Set<unknown>> }).waiters.size;
      const req = http.request(`${ing.url}/api/v1/runs/poll-run/commands?cursor=0&timeout=30`, { headers: { authorization: `Bearer ${t.key}` }, agent: false });
      req.on('error', () => undefined);
      req.end();
      for (let i = 0; i < 100 && waiting() === 0; i++) await sleep(20);
      expect(waiting(), 'the poll waits').to.equal(1);
      req.destroy();
      for (let i = 0; i < 100 && waiting() > 0; i++) await sleep(20);
      expect(waiting(), 'the hang-up ended the wait').to.equal(0);
      const quick = await fetch(`${ing.url}/api/v1/runs/poll-run/commands?cursor=0&timeout=0`, { headers: { authorization: `Bearer ${t.key}` } });
      expect(quick.status).to.equal(200);
      expect(await body(quick)).to.deep.equal({ commands: [], cursor: 0 });
    } finally {
      await ing.close();
    }
  });

  it('a saturated ingest queue answers 429 with Retry-After and counts the rejection', async () => {
    const ing = await startIngest({ queueLimit: 0 });
    try {
      const t = await ing.tenant('q');
      const r = await call(ing, 'PUT', '/runs/q1/steps/0', { key: t.key, json: { step_index: 0, step_id: 'a' } });
      expect(r.status).to.equal(429);
      expect(r.headers.get('retry-after')).to.equal('1');
      expect(r.body.detail).to.match(/saturated/);
      const b = await call(ing, 'POST', '/batch', { key: t.key, json: { requests: [] } });
      expect(b.status).to.equal(429);
      expect(await (await fetch(`${ing.url}/api/v1/metrics`)).text()).to.match(/^trace_ingest_queue_rejected_total\{category="all"\} 2$/m);
    } finally {
      await ing.close();
    }
  });

  it('metadata and bundles survive a restart', async () => {
    const first = await startIngest();
    const t = await first.tenant('keep');
    await recordRun(t, 'kept-run');
    await first.close();
    const second = await startIngest({ dataDir: first.dir });
    try {
      const cookie = await second.login(t);
      expect((await second.get('/runs/kept-run/steps/0000.json', cookie)).status).to.equal(200);
      const hb = await call(second, 'POST', '/heartbeat', { key: t.key, json: { client_id: 'x', client_name: 'y' } });
      expect(hb.status).to.equal(202);
    } finally {
      await second.close();
    }
  });

  it('npm run ingest-admin creates tenants, users and DSNs a running service accepts', async function () {
    this.timeout(60_000);
    const ing = await startIngest();
    try {
      const cli = (...args: string[]) => run(process.execPath, [builtPath('plugins/trace-ingest/cli.ts'), '--data-dir', ing.dir, ...args], { cwd: root, env: { ...process.env, TRACE_ADMIN_PASSWORD: 'correct horse battery' } });
      await cli('tenant', 'create', 'cli-t', '--modelio');
      await cli('user', 'create', '--email', 'Op@Cli.Test', '--tenant', 'cli-t');
      const out = JSON.parse((await cli('dsn', 'create', '--tenant', 'cli-t', '--name', 'runner', '--base-url', ing.url)).stdout);
      expect(out.dsn).to.match(/^http:\/\/tk_[\w-]+@127\.0\.0\.1:\d+$/);
      const listed = JSON.parse((await cli('dsn', 'list')).stdout);
      expect(JSON.stringify(listed)).to.not.include(out.key);
      let failed: unknown;
      try {
        await cli('tenant', 'create', 'cli-t');
      } catch (err) {
        failed = err;
      }
      expect((failed as { code: number }).code).to.equal(1);
      const s = new DebugSession({ runId: 'cli-run', clientName: 'c', outDir: path.join(await tempDir(), 'b'), dsn: out.dsn, logger: collectingLogger() });
      s.recordStep({ step_index: 0, step_id: 'a' });
      await s.close();
      const cookie = await ing.login({ email: 'op@cli.test', password: 'correct horse battery' });
      expect((await ing.get('/runs/cli-run/steps/0000.json', cookie)).status).to.equal(200);
      // the CLI writes again beside the running service: neither loses the other's changes
      await cli('tenant', 'create', 'cli-late');
      const svc = ing.ingest.service;
      expect((await svc.meta.tenants()).map((t) => t.tenant_id)).to.include.members(['cli-t', 'cli-late']);
      expect((await svc.meta.run('cli-run'))?.tenant_id).to.equal('cli-t');
    } finally {
      await ing.close();
    }
  });
});
