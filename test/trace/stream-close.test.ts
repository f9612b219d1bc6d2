// The SDK against ingest servers that differ from ours: one with only the
// spec's per-record routes (no batch route), and closing with the upload left
// to the caller (what the gateway's recorder does).
import { expect } from 'chai';
import type http from 'node:http';
import path from 'node:path';
import { DebugSession, validateBundle } from '../../sdk/index.ts';
import { SdkRunRecorder } from '../../gateway/trace/recorder.ts';
import { traceDir } from '../../gateway/trace/trace-fields.ts';
import type { RunRecord } from '../../gateway/runs/records.ts';
import { pino } from 'pino';
import { startIngest, type TestIngest } from '../support/ingest.ts';
import { collectingLogger, firstHeld, png, tempDir } from '../support/trace.ts';

/** An ingest whose batch route is missing: `status` for it, every other request served as usual. */
const withoutBatch = (status: 404 | 405, seen: string[]) => (inner: http.RequestListener): http.RequestListener => (req, res) => {
  seen.push(`${req.method} ${req.url}`);
  if (req.url === '/api/v1/batch') {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ detail: 'no such route' }));
    return;
  }
  inner(req, res);
};

async function record(s: DebugSession, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    s.recordStep({ step_index: i, step_id: `st${i}`, status: 'passed', action: { type: 'CLICK', params: { x: i, y: i } } });
    await s.attachObservation(i, 'post', await png(i));
    s.recordEvent({ layer: 'planner', kind: 'propose', step_index: i, payload: { i } });
    s.recordEvent({ layer: 'verifier', kind: 'check', step_index: i });
  }
}

describe('trace SDK: batch fallback and closing with the upload in the background', () => {
  for (const status of [404, 405] as const) {
    describe(`against an ingest whose batch route answers ${status}`, () => {
      let ing: TestIngest;
      const seen: string[] = [];
      before(async () => {
        ing = await startIngest({}, withoutBatch(status, seen));
      });
      after(() => ing.close());

      it('sends every batched record on its own route, and tries the batch route once per session', async () => {
        const a = await ing.tenant('nobatch');
        const dir = path.join(await tempDir(), 'bundle');
        // a stalled first request lets records queue up, so the SDK reaches for the batch route
        const held = firstHeld();
        const s = new DebugSession({ runId: `run-nobatch-${status}`, clientName: 'runner', outDir: dir, dsn: a.dsn, logger: collectingLogger(), stream: { fetch: held.fetch } });
        await record(s, 5);
        held.release();
        await record2(s);
        await s.close('passed');
        expect(await validateBundle(dir)).to.deep.equal([]);
        expect(seen.filter((r) => r === 'POST /api/v1/batch')).to.have.length(1);
        expect(s.streamStats!.failed).to.equal(0);
        expect(s.streamStats!.dropped).to.equal(0);

        const cookie = await ing.login(a);
        const trace = await ing.json(`/runs/run-nobatch-${status}/trace.json`, cookie);
        expect(trace.steps.map((st: { step_id: string }) => st.step_id)).to.deep.equal(['st0', 'st1', 'st2', 'st3', 'st4', 'st5']);
        for (let i = 0; i < 6; i++) {
          const events = (await (await ing.get(`/runs/run-nobatch-${status}/events/${String(i).padStart(4, '0')}.jsonl`, cookie)).text()).trim().split('\n');
          expect(events.map((l) => JSON.parse(l).kind)).to.deep.equal(['propose', 'check']);
        }
        const step3 = await ing.json(`/runs/run-nobatch-${status}/steps/0003.json`, cookie);
        expect(step3.step_id).to.equal('st3');
      });
    });
  }

  async function record2(s: DebugSession): Promise<void> {
    s.recordStep({ step_index: 5, step_id: 'st5', status: 'passed', action: { type: 'TYPE', params: { text: 'x' } } });
    s.recordEvent({ layer: 'planner', kind: 'propose', step_index: 5 });
    s.recordEvent({ layer: 'verifier', kind: 'check', step_index: 5 });
  }

  describe('close with upload background', () => {
    let ing: TestIngest;
    let release: () => void = () => undefined;
    before(async () => {
      // every record waits at the door until the test lets it in: the upload cannot finish before that
      ing = await startIngest({}, (inner) => {
        let open = false;
        const gate = new Promise<void>((r) => (release = () => ((open = true), r())));
        return (req, res) => {
          // a record's own route or the batch route (records posted together go out in one batch)
          if (open || !/\/runs|\/batch/.test(req.url ?? '')) return inner(req, res);
          void gate.then(() => inner(req, res));
        };
      });
    });
    after(() => {
      release();
      return ing.close();
    });

    it('returns once the bundle is written; uploaded() resolves when the server has every record', async () => {
      const a = await ing.tenant('bg');
      const dir = path.join(await tempDir(), 'bundle');
      const s = new DebugSession({ runId: 'run-bg', clientName: 'runner', outDir: dir, dsn: a.dsn, logger: collectingLogger() });
      await record(s, 3);
      let uploaded = false;
      const m = await s.close('passed', { upload: 'background' });
      const up = s.uploaded().then(() => (uploaded = true));
      expect(m.step_count).to.equal(3);
      expect(await validateBundle(dir)).to.deep.equal([]);
      expect(uploaded).to.equal(false);
      release();
      await up;
      expect(s.streamStats!.dropped).to.equal(0);
      const cookie = await ing.login(a);
      const manifest = await ing.json('/runs/run-bg/manifest.json', cookie);
      expect(manifest.status).to.equal('passed');
      expect(manifest.trajectory_fingerprint).to.equal(m.trajectory_fingerprint);
    });
  });

  describe("the gateway's recorder", () => {
    let ing: TestIngest;
    before(async () => {
      ing = await startIngest();
    });
    after(() => ing.close());

    it("ends a run with its local bundle written and drains the run's upload when asked (shutdown)", async () => {
      const a = await ing.tenant('gw');
      const dataDir = await tempDir('rec-');
      const recorder = new SdkRunRecorder({ dataDir, captureMode: 'screenshots', dsn: async () => a.dsn, log: pino({ level: 'silent' }), version: '0.0.0-test' });
      const run = { run_id: 'run-rec-bg', tenant_id: 'gw', created_at: new Date().toISOString(), cua_model: 'm', runtime: { compute_backend: 'dom_plane' } } as unknown as RunRecord;
      const rec = (await recorder.begin(run))!;
      const now = new Date().toISOString();
      for (let i = 0; i < 3; i++) {
        await rec.step({ index: i, path: `steps[${i}]`, type: 'click', intent: 'press', success: true, final_url: 'http://site.test/', page_title: 'Site', action: { type: 'CLICK', params: { x: 1, y: 1 } }, attempts: 1, started_at: now, ended_at: now, cost_usd: 0 }, { post: await png(i) });
      }
      await rec.close({ status: 'succeeded', summary: 'ok', cost_usd: 0 });
      expect(await validateBundle(traceDir(dataDir, run))).to.deep.equal([]);
      await recorder.drain();
      const cookie = await ing.login(a);
      const manifest = await ing.json('/runs/run-rec-bg/manifest.json', cookie);
      expect(manifest.status).to.equal('passed');
      expect(manifest.step_count).to.equal(3);
      expect((await ing.get('/runs/run-rec-bg/screenshots/0002_post.png', cookie)).status).to.equal(200);
    });
  });
});

describe('trace SDK: a burst of records', () => {
  let ing: TestIngest;
  before(async () => {
    ing = await startIngest();
  });
  after(() => ing.close());

  it('starts no request inside the recording calls, and sends what they posted together', async () => {
    const a = await ing.tenant('burst');
    const calls: string[] = [];
    let inflight = 0;
    const counting: typeof fetch = (input, init) => {
      calls.push(`${init?.method ?? 'GET'} ${new URL(String(input instanceof Request ? input.url : input)).pathname}`);
      inflight++;
      return fetch(input, init).finally(() => inflight--);
    };
    const s = new DebugSession({ runId: 'run-burst', clientName: 'runner', outDir: path.join(await tempDir(), 'bundle'), dsn: a.dsn, logger: collectingLogger(), stream: { fetch: counting } });
    // the session's first record (its manifest) goes out on its own: the stream is idle once it is answered
    while (!calls.length || inflight) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 20));
    const before = calls.length;
    s.recordStep({ step_index: 0, step_id: 'b0', status: 'passed', action: { type: 'CLICK', params: { x: 1, y: 1 } } });
    s.recordEvent({ layer: 'planner', kind: 'propose', step_index: 0 });
    s.recordEvent({ layer: 'verifier', kind: 'check', step_index: 0 });
    expect(calls.length, 'a recording call builds and sends no request itself').to.equal(before);
    for (let i = 0; i < 100 && calls.length === before; i++) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 50));
    expect(calls.slice(before), 'the step and its events in one batch request').to.deep.equal(['POST /api/v1/batch']);
    await s.close('passed');
    expect(s.streamStats!.dropped).to.equal(0);
    const cookie = await ing.login(a);
    const lines = (await (await ing.get('/runs/run-burst/events/0000.jsonl', cookie)).text()).trim().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as { kind: string }).kind)).to.deep.equal(['propose', 'check']);
  });
});

describe('trace SDK: records that linger to share a request (stream.lingerMs)', () => {
  let ing: TestIngest;
  const seen: string[] = [];
  before(async () => {
    ing = await startIngest({}, (inner) => (req, res) => {
      seen.push(`${req.method} ${req.url}`);
      inner(req, res);
    });
  });
  after(() => ing.close());

  it('sends the records of several steps posted within the linger in one request per lane, and close does not wait for the linger', async () => {
    const a = await ing.tenant('linger');
    const dir = path.join(await tempDir(), 'bundle');
    // a linger far past close's flush deadline (5 s): were close to wait for it, the records would be dropped
    const s = new DebugSession({ runId: 'run-linger', clientName: 'runner', outDir: dir, dsn: a.dsn, logger: collectingLogger(), stream: { lingerMs: 60_000 } });
    await record(s, 4);
    await new Promise((r) => setTimeout(r, 300));
    expect(seen, 'nothing sent while the records linger').to.deep.equal([]);
    const started = Date.now();
    await s.close('passed');
    expect(Date.now() - started, 'close released the linger').to.be.lessThan(5000);
    expect(s.streamStats!.dropped).to.equal(0);
    expect(seen.filter((r) => r === 'POST /api/v1/batch').length, seen.join(', ')).to.be.within(1, 3);
    expect(seen.length, seen.join(', ')).to.be.lessThan(8);
    expect(await validateBundle(dir)).to.deep.equal([]);
    const cookie = await ing.login(a);
    const trace = await ing.json('/runs/run-linger/trace.json', cookie);
    expect((trace.steps as unknown[]).length).to.equal(4);
    for (let i = 0; i < 4; i++) expect((await ing.get(`/runs/run-linger/screenshots/${String(i).padStart(4, '0')}_post.png`, cookie)).status).to.equal(200);
  });
});
