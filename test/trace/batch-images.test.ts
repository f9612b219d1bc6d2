// Screenshots in multipart batches: the ingest's batch route takes a
// `requests` part naming each image's part; the SDK sends queued screenshots
// that way, and falls back to one request per screenshot against an ingest
// whose batch route takes JSON only.
import { expect } from 'chai';
import type http from 'node:http';
import path from 'node:path';
import { DebugSession, validateBundle } from '../../sdk/index.ts';
import { body, startIngest, type TestIngest, type TestTenant } from '../support/ingest.ts';
import { collectingLogger, expectServerCopyEqual, firstHeld, png, tempDir } from '../support/trace.ts';

/** A multipart batch built by the platform's FormData (not the SDK's encoder). */
function form(requests: unknown, files: Record<string, { data: Buffer; type?: string }>, requestsPart: string | null = JSON.stringify({ requests })): FormData {
  const f = new FormData();
  if (requestsPart !== null) f.append('requests', new Blob([requestsPart], { type: 'application/json' }));
  for (const [name, file] of Object.entries(files)) f.append(name, new Blob([file.data], { type: file.type ?? 'image/png' }), `${name}.png`);
  return f;
}

const post = (ing: TestIngest, key: string, payload: FormData) => fetch(`${ing.url}/api/v1/batch`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: payload });

/** Records each request's method, path and content type; `multipart` answers a multipart batch with that status instead. */
const watch = (seen: string[], multipart?: 415) => (inner: http.RequestListener): http.RequestListener => (req, res) => {
  const type = String(req.headers['content-type'] ?? '').split(';')[0];
  seen.push(`${req.method} ${req.url} ${type}`);
  if (multipart && req.url === '/api/v1/batch' && type === 'multipart/form-data') {
    res.writeHead(multipart, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ detail: 'Content-Type must be application/json' }));
    return;
  }
  inner(req, res);
};

/** Records steps with two screenshots each; the first request is held until `release`, so records queue up behind it. */
async function session(t: TestTenant, runId: string, steps: number): Promise<{ s: DebugSession; dir: string }> {
  const dir = path.join(await tempDir(), runId);
  const held = firstHeld();
  const s = new DebugSession({ runId, clientName: 'runner', outDir: dir, dsn: t.dsn, logger: collectingLogger(), stream: { fetch: held.fetch } });
  for (let i = 0; i < steps; i++) {
    s.recordStep({ step_index: i, step_id: `st${i}`, status: 'passed', action: { type: 'CLICK', params: { x: i, y: i } } });
    await s.attachObservation(i, 'pre', await png(2 * i));
    await s.attachObservation(i, 'post', await png(2 * i + 1));
    s.recordEvent({ layer: 'planner', kind: 'propose', step_index: i });
  }
  held.release();
  await s.close('passed');
  expect(await validateBundle(dir)).to.deep.equal([]);
  expect(s.streamStats!.dropped).to.equal(0);
  expect(s.streamStats!.failed).to.equal(0);
  return { s, dir };
}

const screenshotRoute = /^POST \/api\/v1\/runs\/[^/]+\/screenshots\//;

describe('trace ingest: screenshots in multipart batches', function () {
  this.timeout(60_000);
  let ing: TestIngest;
  const seen: string[] = [];
  before(async () => {
    ing = await startIngest({ maxImageBytes: 64 * 1024 }, watch(seen));
  });
  after(() => ing.close());

  it('stores each named image like its own route would, and answers per record (207)', async () => {
    const a = await ing.tenant('mb');
    const [p0, p1, p2] = await Promise.all([png(10), png(11), png(12)]);
    const res = await post(ing, a.key, form(
      [
        { method: 'POST', path: '/runs/mb-1/screenshots/0/pre', image: 'a' },
        { method: 'POST', path: '/runs/mb-1/screenshots/0/post', image: 'b' },
        { method: 'PUT', path: '/runs/mb-1/steps/0', body: { step_index: 0, step_id: 's0' } },
        { method: 'POST', path: '/runs/mb-1/screenshots/1/pre', image: 'missing' },
        { method: 'POST', path: '/runs/mb-1/screenshots/1/post', image: 'text' },
        { method: 'POST', path: '/runs/mb-1/screenshots/2/post', image: 'c' },
        { method: 'POST', path: '/runs/mb-1/screenshots/3/post' },
        { method: 'POST', path: '/runs/other/screenshots/..%2F..%2Fx/post', image: 'a' },
      ],
      { a: { data: p0 }, b: { data: p1 }, c: { data: p2 }, text: { data: Buffer.from('not a png'), type: 'text/plain' } },
    ));
    expect(res.status).to.equal(207);
    const results = (await body(res)).results as Array<{ index: number; status: number; detail?: string }>;
    expect(results.map((r) => r.status)).to.deep.equal([202, 202, 200, 422, 415, 202, 422, 400]);
    expect(results[3]!.detail).to.match(/no part named "missing"/);
    const cookie = await ing.login(a);
    for (const [file, bytes] of [['0000_pre', p0], ['0000_post', p1], ['0002_post', p2]] as const) {
      const got = await ing.get(`/runs/mb-1/screenshots/${file}.png`, cookie);
      expect(got.status, file).to.equal(200);
      expect(Buffer.from(await got.arrayBuffer()).equals(bytes), file).to.equal(true);
    }
    expect((await ing.get('/runs/mb-1/screenshots/0001_post.png', cookie)).status).to.equal(404);
  });

  it('refuses a malformed multipart batch as a whole with {detail}, never a 500', async () => {
    const a = await ing.tenant('mb-bad');
    const image = { a: { data: await png(1) } };
    const cases: Array<[FormData, number, RegExp]> = [
      [form(null, image, null), 422, /part named requests/],
      [form(null, image, '{"requests": ['), 400, /malformed JSON/],
      [form(null, image, '{"__proto__": {"x": 1}, "requests": []}'), 400, /malformed JSON/],
      [form(null, image, '{"requests": "all"}'), 422, /requests: must be an array/],
      [form([{ method: 'POST', path: '/runs/mb-2/screenshots/0/pre', image: 'a' }], { a: { data: Buffer.alloc(70 * 1024, 1) } }), 413, /exceeds the limit/],
    ];
    for (const [payload, status, detail] of cases) {
      const res = await post(ing, a.key, payload);
      expect(res.status, String(detail)).to.equal(status);
      expect((await body(res)).detail).to.match(detail);
    }
    // no credential: 401 before the body is read
    const res = await fetch(`${ing.url}/api/v1/batch`, { method: 'POST', body: form([], image) });
    expect(res.status).to.equal(401);
  });

  it('an SDK session sends queued screenshots together; the server copy equals the bundle byte for byte', async () => {
    const a = await ing.tenant('mb-sdk');
    seen.length = 0;
    const { s, dir } = await session(a, 'mb-sdk-run', 6);
    const multipartBatches = seen.filter((r) => r === 'POST /api/v1/batch multipart/form-data').length;
    const oneByOne = seen.filter((r) => screenshotRoute.test(r)).length;
    expect(multipartBatches, seen.join('\n')).to.be.greaterThan(0);
    // 12 screenshots: at most the one held at the door went on its own route
    expect(oneByOne, seen.join('\n')).to.be.at.most(1);
    expect(s.streamStats!.batches).to.be.greaterThan(0);
    const local = await expectServerCopyEqual(ing.url, 'mb-sdk-run', await ing.login(a), dir);
    expect(local.filter((f) => f.startsWith('screenshots/'))).to.have.length(12);
  });
});

describe('trace SDK against an ingest whose batch route takes JSON only (415 on a multipart batch)', function () {
  this.timeout(60_000);
  let ing: TestIngest;
  const seen: string[] = [];
  before(async () => {
    ing = await startIngest({}, watch(seen, 415));
  });
  after(() => ing.close());

  it('sends each screenshot on its own route, tries the multipart batch once, and keeps batching JSON records', async () => {
    const a = await ing.tenant('jsononly');
    const { dir } = await session(a, 'jsononly-run', 6);
    expect(seen.filter((r) => r === 'POST /api/v1/batch multipart/form-data')).to.have.length(1);
    expect(seen.filter((r) => screenshotRoute.test(r))).to.have.length(12);
    expect(seen.filter((r) => r === 'POST /api/v1/batch application/json').length).to.be.greaterThan(0);
    await expectServerCopyEqual(ing.url, 'jsononly-run', await ing.login(a), dir);
  });
});
