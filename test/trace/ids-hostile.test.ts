// Security issue 10, item 1: hostile run ids and bundle paths against a REAL
// gateway with the trace ingest mounted at /trace/api/v1 and two tenants, each
// with only its own ingest user and DSN. Tenant B must never reach tenant A's
// files: writes answer 400 {detail}, reads 404 {detail}, never 500. The same
// again with the bundles in an S3-compatible bucket. Requests go out over
// node:http with the path verbatim (fetch would resolve `..` and `%2e%2e`
// before sending, as a hostile client does not).
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { IngestService } from '../../plugins/trace-ingest/service.ts';
import { traceDir } from '../../gateway/trace/trace-fields.ts';
import { SAFE_ID_PATTERN } from '../../shared/ids.ts';
import { DebugSession } from '../../sdk/index.ts';
import { newToken, sleep, startGateway, step, type TestGateway } from '../support/gateway.ts';
import { startFakeS3, type FakeS3 } from '../support/s3.ts';
import { collectingLogger, png, tempDir } from '../support/trace.ts';

interface Raw {
  status: number;
  type: string;
  text: string;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON
}

/** One request with the path sent exactly as given. */
function raw(base: string, method: string, p: string, opts: { headers?: Record<string, string>; json?: unknown } = {}): Promise<Raw> {
  const u = new URL(base);
  const payload = opts.json === undefined ? undefined : Buffer.from(JSON.stringify(opts.json));
  const headers: Record<string, string> = { ...(opts.headers ?? {}), ...(payload ? { 'content-type': 'application/json', 'content-length': String(payload.length) } : {}) };
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method, path: p, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type'] ?? ''), text, body });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** Every byte but letters and digits percent-encoded: the server decodes it back to exactly s. */
const enc = (s: string): string => [...Buffer.from(s, 'utf8')].map((b) => (/[A-Za-z0-9]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`)).join('');

const LONG = 'x'.repeat(300);
const HOSTILE = ['.', '..', '%2e%2e', '%2E%2E', '..%2f..', 'a/../..', '%252e%252e', LONG, 'a\u0000b', 'a\nb'];

/** How a hostile id goes into a URL path: fully encoded, and verbatim when it is printable ASCII without a slash. */
function pathForms(id: string): string[] {
  const forms = [enc(id)];
  if (/^[\x21-\x7e]+$/.test(id) && !id.includes('/')) forms.push(id);
  return forms;
}

const SECRET = 'alpha-secret-7f3a';

function expectRefused(r: Raw, status: number | number[], what: string): void {
  expect(r.status, `${what}: ${r.text.slice(0, 200)}`).to.be.oneOf(Array.isArray(status) ? status : [status]);
  expect(r.type, what).to.match(/^application\/json/);
  expect(r.body?.detail, what).to.be.a('string');
  expect(r.text, what).not.to.match(/\n\s+at |ENAMETOOLONG|internal error/);
  expect(r.text, what).not.to.include(SECRET);
}

async function record(dsn: string, runId: string, marker: string): Promise<void> {
  const s = new DebugSession({ runId, clientName: 'c', outDir: path.join(await tempDir(), 'b'), dsn, logger: collectingLogger() });
  s.recordStep({ step_index: 0, step_id: marker, status: 'passed' });
  await s.attachObservation(0, 'pre', await png(5));
  await s.close();
}

for (const backend of ['file', 's3'] as const) {
  describe(`hostile run ids and bundle paths on the gateway's trace ingest (${backend} store)`, function () {
    this.timeout(60_000);
    let gw: TestGateway;
    let s3: FakeS3 | undefined;
    let api: string;
    let dsnB: string;
    let keyB: string;
    let cookieA: string;
    let cookieB: string;
    const tokenA = newToken();
    const tokenB = newToken();

    before(async () => {
      s3 = backend === 's3' ? await startFakeS3('AKIDHOSTILE') : undefined;
      const env: Record<string, string> = s3 ? { TRACE_S3_ENDPOINT: s3.url, TRACE_S3_BUCKET: 'traces', TRACE_S3_ACCESS_KEY_ID: 'AKIDHOSTILE', TRACE_S3_SECRET_ACCESS_KEY: 's' } : {};
      gw = await startGateway({ env, keys: { [tokenA]: { tenant_id: 'alpha' }, [tokenB]: { tenant_id: 'beta' } } });
      api = '/trace/api/v1';
      const dest = gw.gateway.services.plugins.traceDestination();
      expect(dest, 'the gateway mounts the trace ingest').not.to.equal(undefined);
      const dsnA = await dest!.dsnFor('alpha', gw.url);
      dsnB = await dest!.dsnFor('beta', gw.url);
      keyB = decodeURIComponent(new URL(dsnB).username);
      // the operator adds a user per tenant beside the running service, as the ingest admin CLI does
      const svc = await IngestService.open({ dataDir: path.join(gw.dir, 'plugins', 'trace-ingest', 'data') });
      for (const tenant of ['alpha', 'beta']) await svc.createUser(`viewer@${tenant}.test`, `pw-${tenant}-0123456789`, tenant);
      await svc.close();
      const login = async (tenant: string) => {
        let r = await gw.req('POST', `${api}/auth/login`, { body: { email: `viewer@${tenant}.test`, password: `pw-${tenant}-0123456789` } });
        // the running service re-reads its accounts at most every 250 ms
        for (let i = 0; r.status === 401 && i < 10; i++) {
          await sleep(300);
          r = await gw.req('POST', `${api}/auth/login`, { body: { email: `viewer@${tenant}.test`, password: `pw-${tenant}-0123456789` } });
        }
        expect(r.status, r.text).to.equal(200);
        return r.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
      };
      cookieA = await login('alpha');
      cookieB = await login('beta');
      await record(dsnA, 'run-a', SECRET);
      await record(dsnB, 'run-b', 'beta-step');
      const own = await raw(gw.url, 'GET', `${api}/runs/run-a/trace.json`, { headers: { cookie: cookieA } });
      expect(own.status).to.equal(200);
      expect(own.text).to.include(SECRET);
    });
    after(async () => {
      await gw.close();
      await s3?.close();
    });

    const writes = (runPath: string, id: string): Array<[string, string, unknown]> => [
      ['POST', '/runs', { run_id: id, debug_session_id: 'dbg_hostile', client_name: 'probe', started_at: new Date().toISOString() }],
      ['PUT', `/runs/${runPath}/costs`, { total_usd: 1 }],
      ['POST', `/runs/${runPath}/outcomes`, { scope: 'session', verdict: { status: 'passed' } }],
      ['POST', `/runs/${runPath}/eval-candidates`, { step_index: 0, reason: 'probe' }],
      ['PUT', `/runs/${runPath}/findings`, { findings: [] }],
    ];

    it('refuses every hostile run id on create and on the run-scoped writes: 400 {detail}, never 500', async () => {
      for (const id of HOSTILE) {
        for (const form of pathForms(id)) {
          for (const [method, p, json] of writes(form, id)) {
            const r = await raw(gw.url, method, `${api}${p}`, { headers: { authorization: `Bearer ${keyB}` }, json });
            expectRefused(r, 400, `${method} ${p} (run id ${JSON.stringify(id)})`);
            if (id === LONG) expect(r.body.detail, 'the detail names the cap').to.include('128');
          }
        }
      }
      // an id with a slash sent unencoded is no run id at all: no route, still a {detail}
      const r = await raw(gw.url, 'PUT', `${api}/runs/a/../../costs`, { headers: { authorization: `Bearer ${keyB}` }, json: { total_usd: 1 } });
      expectRefused(r, [400, 404], 'PUT /runs/a/../../costs');
      // the batch route answers the same per request
      const batch = await raw(gw.url, 'POST', `${api}/batch`, { headers: { authorization: `Bearer ${keyB}` }, json: { requests: HOSTILE.map((id) => ({ method: 'PUT', path: `/runs/${enc(id)}/costs`, body: { total_usd: 1 } })) } });
      expect(batch.status, batch.text).to.equal(207);
      for (const res of batch.body.results) expect(res, JSON.stringify(res)).to.include({ status: 400 });
      // the OpenAPI document says so
      const doc = (await raw(gw.url, 'GET', `${api}/openapi.json`)).body;
      expect(doc.paths['/runs/{run_id}/costs'].put.parameters[0].schema).to.deep.equal({ $ref: '#/components/schemas/SafeId' });
      expect(doc.paths['/runs/{run_id}/costs'].put.responses).to.have.property('400');
      expect(doc.components.schemas.SafeId.pattern).to.equal(SAFE_ID_PATTERN);
    });

    it("never lets tenant B read tenant A's files through a hostile run id: 404 {detail}", async () => {
      const targets = ['files', 'files/alpha/run-a/trace.json', `files/${enc('alpha/run-a/trace.json')}`, 'files/alpha/run-a/screenshots/0000_pre.png', 'files/bundles/alpha/run-a/trace.json', 'trace.json', 'manifest.json', 'screenshots/0000_pre.png'];
      for (const id of HOSTILE) {
        // the attack: B first tries to create the run with its own DSN, then reads through it
        await raw(gw.url, 'POST', `${api}/runs`, { headers: { authorization: `Bearer ${keyB}` }, json: writes('x', id)[0]![2] });
        for (const form of pathForms(id)) {
          for (const t of targets) {
            const r = await raw(gw.url, 'GET', `${api}/runs/${form}/${t}`, { headers: { cookie: cookieB } });
            expectRefused(r, 404, `GET /runs/${form}/${t}`);
            expect(r.body.files, `GET /runs/${form}/${t}`).to.equal(undefined);
          }
        }
      }
      const runs = await raw(gw.url, 'GET', `${api}/runs`, { headers: { cookie: cookieB } });
      expect(runs.body.runs.map((r: { run_id: string }) => r.run_id)).to.deep.equal(['run-b']);
    });

    it("refuses bundle paths that leave B's own run, encoded or not: 404 {detail}", async () => {
      const escapes = [
        '../../alpha/run-a/trace.json',
        '..%2f..%2falpha%2frun-a%2ftrace.json',
        '%2e%2e/%2e%2e/alpha/run-a/trace.json',
        '%2E%2E%2F%2E%2E%2Falpha%2Frun-a%2Ftrace.json',
        '..%5c..%5calpha%5crun-a%5ctrace.json',
        '..\\..\\alpha\\run-a\\trace.json'.replace(/\\/g, '%5C'),
        '%252e%252e%252f%252e%252e%252falpha%252frun-a%252ftrace.json',
        '%252e%252e/%252e%252e/alpha/run-a/trace.json',
        'steps/../../../alpha/run-a/trace.json',
        'steps/%2e%2e/%2e%2e/%2e%2e/meta.json',
        '%2e%2e%2f%2e%2e%2f%2e%2e%2fmeta.json',
        './trace.json',
        'steps//0000.json',
        '%2ftrace.json',
        'trace.json%00',
      ];
      for (const p of escapes) {
        const r = await raw(gw.url, 'GET', `${api}/runs/run-b/files/${p}`, { headers: { cookie: cookieB } });
        expectRefused(r, 404, `GET /runs/run-b/files/${p}`);
        expect(r.text).not.to.include('password_hash');
      }
      const ok = await raw(gw.url, 'GET', `${api}/runs/run-b/files/steps/0000.json`, { headers: { cookie: cookieB } });
      expect(ok.status, ok.text).to.equal(200);
    });

    it('accepts every safe id, at the cap and full of colons, and reads it back (never a file name too long)', async () => {
      const ids = [`b${':'.repeat(127)}`, `b${'~'.repeat(127)}`, 'constructor', `${randomUUID()}:branch:0123abcd`];
      for (const id of ids) {
        const created = await raw(gw.url, 'POST', `${api}/runs`, { headers: { authorization: `Bearer ${keyB}` }, json: writes('x', id)[0]![2] });
        expect(created.status, `${id}: ${created.text}`).to.equal(201);
        const costs = await raw(gw.url, 'PUT', `${api}/runs/${enc(id)}/costs`, { headers: { authorization: `Bearer ${keyB}` }, json: { total_usd: 2 } });
        expect(costs.status, costs.text).to.equal(200);
        const files = await raw(gw.url, 'GET', `${api}/runs/${enc(id)}/files`, { headers: { cookie: cookieB } });
        expect(files.body.files, id).to.include.members(['manifest.json', 'live/costs.json']);
        const read = await raw(gw.url, 'GET', `${api}/runs/${enc(id)}/files/live/costs.json`, { headers: { cookie: cookieB } });
        expect(read.body, id).to.deep.equal({ total_usd: 2 });
        expect((await raw(gw.url, 'GET', `${api}/runs/${enc(id)}/files`, { headers: { cookie: cookieA } })).status, 'another tenant').to.equal(404);
      }
    });

    it('leaves nothing outside the tenants\' run folders: no manifest.json or schema/ at the root of the bundles', async () => {
      let keys: string[];
      if (s3) keys = [...s3.objects.keys()];
      else {
        const root = path.join(gw.dir, 'plugins', 'trace-ingest', 'data', 'bundles');
        keys = (await readdir(root, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).map((e) => path.relative(root, path.join(e.parentPath, e.name)));
      }
      expect(keys.length).to.be.greaterThan(4);
      // tenant B's only folders: run-b and the safe ids of the test above
      for (const k of keys) expect(k, k).to.match(s3 ? /^traces\/bundles\/(alpha\/run-a|beta\/[A-Za-z0-9][^/]*)\// : /^(alpha\/run-a|beta\/[A-Za-z0-9][^/]*)\//);
      expect(keys.filter((k) => k.includes('/beta/..') || k.startsWith('beta/..') || k.startsWith('beta/.'))).to.deep.equal([]);
    });
  });
}

describe("the gateway's GET /v1/runs/{id}/trace/<path> stays inside the run's trace folder", function () {
  this.timeout(30_000);
  let gw: TestGateway;
  const tokenA = newToken();
  const tokenB = newToken();
  before(async () => {
    gw = await startGateway({ env: { TRACE_INGEST: 'off' }, keys: { [tokenA]: { tenant_id: 'alpha' }, [tokenB]: { tenant_id: 'beta' } } });
  });
  after(() => gw.close());

  async function runWithTrace(token: string, tenant: string, marker: string): Promise<string> {
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan: [step()] } });
    expect(r.status, r.text).to.be.oneOf([200, 201, 202]);
    const run = { tenant_id: tenant, run_id: String(r.body.run_id) };
    const dir = traceDir(gw.dir, run);
    await mkdir(path.join(dir, 'steps'), { recursive: true });
    await writeFile(path.join(dir, 'trace.json'), JSON.stringify({ marker }));
    await writeFile(path.join(dir, 'steps', '0000.json'), JSON.stringify({ marker }));
    await writeFile(path.join(dir, '..', 'extracted_rows.json'), JSON.stringify([{ marker }]));
    return run.run_id;
  }

  it("answers 404 {detail} to every traversal and never serves another run's or tenant's file", async () => {
    const a = await runWithTrace(tokenA, 'alpha', SECRET);
    const b = await runWithTrace(tokenB, 'beta', 'beta-marker');
    const headers = { 'X-Service-Token': tokenB };
    expect((await raw(gw.url, 'GET', `/v1/runs/${b}/trace/steps/0000.json`, { headers })).text).to.include('beta-marker');
    const escapes = [
      `../../../alpha/${a}/trace/trace.json`,
      `..%2F..%2F..%2Falpha%2F${a}%2Ftrace%2Ftrace.json`,
      `%2e%2e/%2e%2e/%2e%2e/alpha/${a}/trace/trace.json`,
      `%2E%2E%2F%2E%2E%2F%2E%2E%2Falpha%2F${a}%2Ftrace%2Ftrace.json`,
      `..%5C..%5C..%5Calpha%5C${a}%5Ctrace%5Ctrace.json`,
      `%252e%252e%252f%252e%252e%252f%252e%252e%252falpha%252f${a}%252ftrace%252ftrace.json`,
      `steps/..%2F..%2F..%2F..%2Falpha%2F${a}%2Ftrace%2Ftrace.json`,
      '..%2Fextracted_rows.json',
      '%2e%2e/extracted_rows.json',
      '%2Ftrace.json',
      'trace.json%00.png',
    ];
    for (const p of escapes) {
      const r = await raw(gw.url, 'GET', `/v1/runs/${b}/trace/${p}`, { headers });
      expectRefused(r, 404, `GET /v1/runs/{b}/trace/${p}`);
      expect(r.text).not.to.include('beta-marker');
    }
    for (const id of ['..', '%2e%2e', enc('..'), enc(`../alpha/${a}`)]) {
      const r = await raw(gw.url, 'GET', `/v1/runs/${id}/trace/trace.json`, { headers });
      expectRefused(r, 404, `GET /v1/runs/${id}/trace/trace.json`);
    }
  });
});
