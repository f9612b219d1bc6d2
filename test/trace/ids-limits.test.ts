// Every path segment of the ingest routes has a documented limit
// (docs/trace-ingest.md; pathParamProblem in plugins/trace-ingest/route-kit.ts):
// past it a real ingest answers 400 {detail} naming the limit, before the body
// is read (a screenshot's multipart included), on its own route and inside
// POST /batch; never 500. At the limit the record is stored and reads back.
import { expect } from 'chai';
import { startIngest, type TestIngest, type TestTenant } from '../support/ingest.ts';
import { png } from '../support/trace.ts';

const LONG_ID = 'x'.repeat(256);
const ID_128 = `a${'~'.repeat(63)}${':'.repeat(64)}`;
const RELPATH_49 = `0007-${'l'.repeat(32)}-123456.json`;

interface Answer {
  status: number;
  type: string;
  text: string;
  detail?: string;
}

describe('trace ingest: path segment limits', function () {
  this.timeout(60_000);
  let ing: TestIngest;
  let t: TestTenant;

  const send = async (method: string, p: string, body?: unknown, form?: FormData): Promise<Answer> => {
    const headers: Record<string, string> = { authorization: `Bearer ${t.key}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const r = await fetch(`${ing.url}/api/v1${p}`, { method, headers, body: form ?? (body === undefined ? undefined : JSON.stringify(body)) });
    const text = await r.text();
    let detail: string | undefined;
    try {
      detail = (JSON.parse(text) as { detail?: string }).detail;
    } catch {
      detail = undefined;
    }
    return { status: r.status, type: r.headers.get('content-type') ?? '', text, detail };
  };
  const manifest = (runId: string) => ({ schema_version: '1.0.0', run_id: runId, debug_session_id: 'dbg_limits', client_name: 'c', status: 'running', started_at: new Date().toISOString(), capture_mode: 'trace' });
  const screenshotForm = async () => {
    const f = new FormData();
    f.append('image', new Blob([await png(3)], { type: 'image/png' }), 'x.png');
    return f;
  };

  before(async () => {
    ing = await startIngest();
    t = await ing.tenant('limits');
    expect((await send('POST', '/runs', manifest('lim'))).status).to.equal(201);
  });
  after(() => ing.close());

  it('answers 400 {detail} naming the limit for every segment past it, never 500', async () => {
    const step = { step_index: 0, step_id: 's', status: 'passed' };
    const cases: Array<[string, string, unknown, RegExp, boolean?]> = [
      ['POST', '/runs', manifest(LONG_ID), /128/],
      ['PUT', `/runs/${LONG_ID}/trace`, { session: { run_id: LONG_ID }, steps: [] }, /128/],
      ['PUT', `/runs/${LONG_ID}/costs`, { total_usd: 1 }, /128/],
      ['POST', `/runs/${LONG_ID}/outcomes`, { scope: 'session', verdict: { status: 'passed' } }, /128/],
      ['POST', `/runs/${LONG_ID}/eval-candidates`, { step_index: 0, reason: 'x' }, /128/],
      ['PUT', `/runs/${LONG_ID}/findings`, { findings: [] }, /128/],
      ['PUT', '/runs/lim/steps/1000000', { ...step, step_index: 1000000 }, /999999/],
      ['PUT', `/runs/lim/steps/${'9'.repeat(300)}`, step, /999999/],
      ['PUT', '/runs/lim/steps/-1', step, /999999/],
      ['PUT', '/runs/lim/steps/zero', step, /999999/],
      ['POST', '/runs/lim/steps/1000000/judge-decisions', {}, /999999/],
      ['PUT', '/runs/lim/preferences/1000000', {}, /999999/],
      ['POST', `/runs/lim/modelio/${RELPATH_49.replace('0007-', '0007-l')}`, {}, /relpath/],
      ['POST', `/runs/lim/modelio/${'x'.repeat(256)}.json`, {}, /relpath/],
      ['PUT', `/runs/lim/side-effects/${LONG_ID}`, {}, /128/],
      ['GET', `/runs/${LONG_ID}/commands`, undefined, /128/],
      ['GET', '/runs/lim/commands?cursor=1000000', undefined, /999999/],
      // segments checked before the multipart body: 400, not 415 for the (valid) image
      ['POST', `/runs/${LONG_ID}/screenshots/0/pre`, undefined, /128/, true],
      ['POST', '/runs/lim/screenshots/1000000/pre', undefined, /999999/, true],
      ['POST', `/runs/lim/screenshots/0/${'k'.repeat(256)}`, undefined, /pre, post, target, diff/, true],
    ];
    for (const [method, p, body, names, multipart] of cases) {
      const r = multipart ? await send(method, p, undefined, await screenshotForm()) : await send(method, p, body);
      const what = `${method} ${p.slice(0, 80)}`;
      expect(r.status, `${what}: ${r.text.slice(0, 200)}`).to.equal(400);
      expect(r.type, what).to.match(/^application\/json/);
      expect(r.detail, what).to.match(names);
      expect(r.text, `${what} echoes no long value`).not.to.include('x'.repeat(201));
    }
  });

  it('answers the same 400s per record inside POST /batch', async () => {
    const r = await send('POST', '/batch', {
      requests: [
        { method: 'PUT', path: `/runs/${LONG_ID}/costs`, body: { total_usd: 1 } },
        { method: 'PUT', path: '/runs/lim/steps/1000000', body: { step_index: 1000000, step_id: 's', status: 'passed' } },
        { method: 'POST', path: '/runs/lim/modelio/bad.json', body: {} },
        { method: 'PUT', path: '/runs/lim/costs', body: { total_usd: 1 } },
      ],
    });
    expect(r.status, r.text).to.equal(207);
    const results = (JSON.parse(r.text) as { results: Array<{ status: number; detail?: string }> }).results;
    expect(results.map((x) => x.status)).to.deep.equal([400, 400, 400, 200]);
  });

  it('refuses body step indexes past 999999 where they name a file (422), and takes the ones at the limit', async () => {
    expect((await send('POST', '/runs/lim/logs', { text: 'x', step_index: 1e300 })).status).to.equal(422);
    expect((await send('POST', '/runs/lim/events', { events: [], step_index: 1000000 })).status).to.equal(422);
    expect((await send('POST', '/runs/lim/logs', { text: 'at the limit', step_index: 999999 })).status).to.equal(202);
  });

  it('stores and reads back records whose segments sit exactly at their limits', async () => {
    expect((await send('POST', '/runs', manifest(ID_128))).status).to.equal(201);
    const enc = encodeURIComponent(ID_128);
    expect((await send('PUT', `/runs/${enc}/steps/999999`, { step_index: 999999, step_id: 'last', status: 'passed' })).status).to.equal(200);
    expect((await send('POST', `/runs/${enc}/screenshots/999999/diff`, undefined, await screenshotForm())).status).to.equal(202);
    const modelio = { layer: 'l'.repeat(32), request: { model: 'm' }, response: { text: 'ok' }, prompt_hash: 'a'.repeat(64), redaction_applied: null };
    expect(RELPATH_49).to.have.length(49);
    const mr = await send('POST', `/runs/${enc}/modelio/${RELPATH_49}`, modelio);
    expect(mr.status, mr.text).to.equal(202);
    const cookie = await ing.login(t);
    // writes behind 202 land in the background: poll the file list
    const want = ['steps/999999.json', 'screenshots/999999_diff.png', `modelio/${RELPATH_49}`];
    let files: string[] = [];
    for (let i = 0; i < 50; i++) {
      const r = await ing.get(`/runs/${enc}/files`, cookie);
      expect(r.status).to.equal(200);
      const b = (await r.json()) as { files: Array<string | { path: string }> };
      files = b.files.map((f) => (typeof f === 'string' ? f : f.path));
      if (want.every((w) => files.includes(w))) break;
      await new Promise((res) => setTimeout(res, 100));
    }
    expect(files).to.include.members(want);
    const s = await ing.get(`/runs/${enc}/files/steps/999999.json`, cookie);
    expect(s.status).to.equal(200);
    expect(((await s.json()) as { step_id: string }).step_id).to.equal('last');
  });
});
