// Drop ledger and reconciliation: records the ingest did not take while it
// was down are re-sent at close, so the server ends with the run; a record it
// refused with 429 twice is dropped, as the spec's client does: two requests,
// none at close, none at the next start.
import { expect } from 'chai';
import { readFile } from 'node:fs/promises';
import type http from 'node:http';
import path from 'node:path';
import { DebugSession, LEDGER_FILE, reconcileBundle, validateBundle } from '../../sdk/index.ts';
import { startIngest, type TestIngest } from '../support/ingest.ts';
import { collectingLogger, png, tempDir } from '../support/trace.ts';

type Refuse = 0 | 503 | 'killed';

/** While `state.refuse` is set, every ingest call is answered 503, or its connection cut as by a dying ingest. */
const refusing = (state: { refuse: Refuse }) => (inner: http.RequestListener): http.RequestListener => (req, res) => {
  const ingestCall = req.url?.startsWith('/api/v1/') && !req.url.startsWith('/api/v1/auth/');
  if (!state.refuse || !ingestCall) return inner(req, res);
  if (state.refuse === 'killed') {
    req.socket.destroy();
    return;
  }
  res.writeHead(state.refuse, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ detail: 'not now' }));
};

async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 10));
}

const REASON: Record<Exclude<Refuse, 0>, string> = { 503: 'http_503', killed: 'unreachable' };

describe('trace SDK: a record the ingest refused with 429 twice', () => {
  let ing: TestIngest;
  const SHOT = /\/runs\/run-429-twice\/screenshots\/1\/post$/;
  const state = { refuse: false, requests: 0 };
  before(async () => {
    ing = await startIngest({}, (inner) => (req, res) => {
      if (!SHOT.test(req.url ?? '')) return inner(req, res);
      state.requests++;
      if (!state.refuse) return inner(req, res);
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '0' });
      res.end(JSON.stringify({ detail: 'ingest queue saturated' }));
    });
  });
  after(() => ing.close());

  it('is requested twice in all: not re-sent at close, nor at the next start', async () => {
    const a = await ing.tenant('rc429');
    const runId = 'run-429-twice';
    const dir = path.join(await tempDir(), 'bundle');
    const logger = collectingLogger();
    const s = new DebugSession({ runId, clientName: 'runner', outDir: dir, dsn: a.dsn, logger });
    for (let i = 0; i < 3; i++) {
      state.refuse = i === 1;
      s.recordStep({ step_index: i, step_id: `st${i}`, status: 'passed', action: { type: 'CLICK', params: { x: i, y: i } } });
      await s.attachObservation(i, 'post', await png(i));
      await until(() => s.streamStats!.queue_depth === 0 && (i !== 1 || s.dropLedger.some((d) => d.kind === 'screenshot')));
    }
    state.refuse = false; // from here a re-send would be taken, and counted
    expect(state.requests).to.equal(2);
    await s.close('passed');
    expect(state.requests, 'requests after close').to.equal(2);
    const shot = s.dropLedger.filter((d) => d.kind === 'screenshot');
    expect(shot).to.deep.equal([{ kind: 'screenshot', method: 'POST', path: `/runs/${runId}/screenshots/1/post`, reason: '429', recovered: false }]);
    const kept = JSON.parse(await readFile(path.join(dir, LEDGER_FILE), 'utf8'));
    expect(kept.records.filter((d: { kind: string }) => d.kind === 'screenshot'), 'no copy kept for a later start').to.deep.equal(shot);
    expect(await reconcileBundle(dir, { dsn: a.dsn })).to.deep.include({ pending: 0, recovered: 0, left: 0 });
    expect(state.requests, 'requests after the next start').to.equal(2);
    const cookie = await ing.login(a);
    expect((await ing.get(`/runs/${runId}/screenshots/0001_post.png`, cookie)).status).to.equal(404);
    expect((await ing.get(`/runs/${runId}/screenshots/0002_post.png`, cookie)).status).to.equal(200);
    expect(await validateBundle(dir)).to.deep.equal([]);
  });
});

for (const status of [503, 'killed'] as const) {
  describe(`trace SDK reconciliation after the ingest ${status === 'killed' ? 'went away' : `answered ${status}`} mid-session`, () => {
    let ing: TestIngest;
    const state: { refuse: Refuse } = { refuse: 0 };
    before(async () => {
      ing = await startIngest({}, refusing(state));
    });
    after(() => ing.close());

    it('keeps a ledger of what the ingest did not take and re-sends it at close', async () => {
      const a = await ing.tenant(`rc${status}`);
      const runId = `run-rc-${status}`;
      const dir = path.join(await tempDir(), 'bundle');
      const s = new DebugSession({ runId, clientName: 'runner', outDir: dir, dsn: a.dsn, logger: collectingLogger() });
      const step = async (i: number) => {
        s.recordStep({ step_index: i, step_id: `st${i}`, status: 'passed', action: { type: 'CLICK', params: { x: i, y: i } } });
        await s.attachObservation(i, 'post', await png(i));
        s.recordEvent({ layer: 'planner', kind: 'propose', step_index: i, payload: { i } });
      };
      await step(0);
      await until(() => s.streamStats!.queue_depth === 0 && s.streamStats!.sent >= 3);
      state.refuse = status;
      for (let i = 1; i < 4; i++) await step(i);
      await until(() => s.dropLedger.filter((d) => d.kind !== 'heartbeat').length >= 9);
      expect(s.dropLedger.every((d) => !d.recovered)).to.equal(true);
      expect(s.dropLedger.map((d) => d.reason)).to.include(REASON[status]);
      state.refuse = 0;
      await step(4);
      await s.close('passed');
      expect(await validateBundle(dir)).to.deep.equal([]);
      expect(s.dropLedger.length).to.be.greaterThan(0);
      expect(s.dropLedger.filter((d) => !d.recovered)).to.deep.equal([]);
      const kept = JSON.parse(await readFile(path.join(dir, 'diagnostics', 'stream_drops.json'), 'utf8'));
      expect(kept.records).to.deep.equal(s.dropLedger);

      const cookie = await ing.login(a);
      const trace = await ing.json(`/runs/${runId}/trace.json`, cookie);
      expect(trace.steps).to.have.length(5);
      for (let i = 0; i < 5; i++) {
        const n = String(i).padStart(4, '0');
        const shot = await ing.get(`/runs/${runId}/screenshots/${n}_post.png`, cookie);
        expect(shot.status, `screenshot ${i}`).to.equal(200);
        expect(Buffer.from(await shot.arrayBuffer()).equals(await png(i))).to.equal(true);
        const events = (await (await ing.get(`/runs/${runId}/events/${n}.jsonl`, cookie)).text()).trim().split('\n');
        expect(events, `events of step ${i}, once each`).to.have.length(1);
        expect((await ing.json(`/runs/${runId}/steps/${n}.json`, cookie)).step_id).to.equal(`st${i}`);
      }
    });
  });
}
