import { expect } from 'chai';
import { readFile } from 'node:fs/promises';
import type http from 'node:http';
import path from 'node:path';
import { DebugSession, parseDsn, parseRetryAfter, validateBundle, type Adapter, type SideEffect } from '../../sdk/index.ts';
import { body, startIngest, type TestIngest } from '../support/ingest.ts';
import { collectingLogger, png, tempDir } from '../support/trace.ts';

const until = async (cond: () => boolean, ms = 10_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('trace SDK streaming to a real ingest service', () => {
  it('parses DSNs and Retry-After exactly as the spec says', () => {
    expect(parseDsn('http://tk_abc@127.0.0.1:8300')).to.deep.equal({ baseUrl: 'http://127.0.0.1:8300/api/v1', key: 'tk_abc' });
    expect(parseDsn('https://k@example.com/trace/')).to.deep.equal({ baseUrl: 'https://example.com/trace/api/v1', key: 'k' });
    expect(() => parseDsn('http://127.0.0.1:8300')).to.throw(/no key/);
    expect(parseRetryAfter('7')).to.equal(7);
    expect(parseRetryAfter(null)).to.equal(1.0);
    expect(parseRetryAfter('Wed, 21 Oct 2015 07:28:00 GMT')).to.equal(1.0);
    expect(parseRetryAfter('soon')).to.equal(1.0);
    expect(parseRetryAfter('1.5')).to.equal(1.0);
    expect(parseRetryAfter('120')).to.equal(30);
    expect(parseRetryAfter('-4')).to.equal(0);
  });

  describe('with a tenant that enabled model-io', () => {
    let ing: TestIngest;
    before(async () => {
      ing = await startIngest();
    });
    after(() => ing.close());

    it('every method streams live, the bundle validates, and reads return the bytes the SDK wrote', async () => {
      const a = await ing.tenant('acme');
      const dir = path.join(await tempDir(), 'bundle');
      const log = collectingLogger();
      const s = new DebugSession({ runId: 'run-stream-1', clientName: 'runner', clientVersion: '1.2.3', outDir: dir, dsn: a.dsn, logger: log, captureMode: 'full', captureLogprobs: true, groupId: 'grp',
        taskSpec: { task_spec_id: 'ts', instruction: 'find', subgoals: [{ subgoal_id: 'g1' }] } });
      expect(s.isStreaming).to.equal(true);
      for (let i = 0; i < 6; i++) {
        s.recordStep({ step_index: i, step_id: `st${i}`, status: i === 4 ? 'failed' : 'passed', action: { type: 'CLICK', params: { x: i, y: 2 * i } }, grounding: { provenance: i === 2 ? 'dom' : 'screenshot' } });
        await s.attachObservation(i, 'pre', await png(i));
        await s.attachObservation(i, 'post', await png(i + 50));
        s.recordEvent({ layer: 'planner', kind: 'propose', step_index: i, payload: { i } });
        s.recordEvent({ layer: 'grounding', kind: 'select', step_index: i });
        await s.recordModelio({ request: { model: 'brain-1', messages: [{ role: 'user', content: `step ${i}` }] }, response: { text: 'CLICK' } }, { stepIndex: i, layer: 'planner' });
        s.setStepCosts(i, { total_usd: 0.01, tokens_in: 100, tokens_out: 5 });
        s.appendLog(`step ${i} done\n`, { stepIndex: i });
      }
      s.recordStepIteration(1, { step_id: 'st1-again', status: 'passed' });
      s.recordEvent({ layer: 'recovery', kind: 'retry' });
      s.appendLog('run log line\n');
      s.attachVerifier(0, { status: 'passed', check: 'url', expected: '/a', actual: '/a' });
      s.setScore(0, 0.9, { comparator: 'verifier', components: { progress: 0.5 } });
      s.recordJudgeDecision(1, { judgeId: 'llm', judgeType: 'model', verdict: { status: 'passed', score: 0.7 } });
      s.markForEval(4, { reason: 'failed', candidateClusterId: 'c1' });
      s.recordReasoning(3, 'I should click');
      const se = s.declareSideEffect({ stepIndex: 5, resource: 'form', action: 'submit', idempotencyKey: 'k1' });
      s.commitSideEffect(se, { status: 200 });
      s.recordSubgoalCompletion(5, 'g1', 1);
      s.setLoopDetected(4);
      s.setStepVersions(2, { grounder: 'dom-v1' });
      s.attachEnvFingerprint(2, { url_host: 'example.test' });
      s.setCosts({ proxy_usd: 0.02 });
      s.addTag('env', 'test');
      s.setLiveEndpoints({ status_url: 'http://x/status' });
      s.finalizeOutcome({ verdict: { status: 'passed', score: 0.8 } });
      s.recordPreference(2, { preferred: 'a' });
      const m = await s.close('passed');
      expect(await validateBundle(dir)).to.deep.equal([]);
      expect(s.streamStats!.dropped).to.equal(0);
      expect(s.streamStats!.batches).to.be.greaterThan(0);

      const cookie = await ing.login(a);
      const listed = await ing.json('/runs', cookie);
      expect(listed.runs.map((r: { run_id: string }) => r.run_id)).to.include('run-stream-1');
      const remote = new Set<string>((await ing.json('/runs/run-stream-1/files', cookie)).files);
      for (const rel of [...m.paths!, 'manifest.json']) {
        const res = await ing.get(`/runs/run-stream-1/files/${rel}`, cookie);
        expect(res.status, rel).to.equal(200);
        expect(remote.has(rel), rel).to.equal(true);
        const local = await readFile(path.join(dir, rel));
        expect(Buffer.from(await res.arrayBuffer()).equals(local), `${rel} differs`).to.equal(true);
      }
      // the spec's read routes
      const shot = await ing.get('/runs/run-stream-1/screenshots/0003_post.png', cookie);
      expect(shot.headers.get('content-type')).to.equal('image/png');
      expect(Buffer.from(await shot.arrayBuffer()).equals(await readFile(path.join(dir, 'screenshots/0003_post.png')))).to.equal(true);
      expect((await ing.json('/runs/run-stream-1/manifest.json', cookie)).trajectory_fingerprint).to.equal(m.trajectory_fingerprint);
      expect((await ing.json('/runs/run-stream-1/trace.json', cookie)).steps).to.have.length(6);
      expect((await ing.json('/runs/run-stream-1/steps/0001.json', cookie)).step_iterations).to.equal(2);
      expect((await ing.get('/runs/run-stream-1/events/0002.jsonl', cookie)).status).to.equal(200);
      expect((await ing.json('/runs/run-stream-1/diagnostics/findings.json', cookie)).findings.length).to.be.greaterThan(0);
      const reward = await ing.json('/runs/run-stream-1/reward', cookie);
      expect(reward).to.include({ reward: 0.8, source: 'outcome' });
      // a bundle downloaded from the service validates too
      const conns = await ing.json('/connections', cookie);
      expect(conns.connections.map((c: { client_id: string }) => c.client_id)).to.include(s.debugSessionId);
      expect(conns.connections.find((c: { client_id: string }) => c.client_id === s.debugSessionId)).to.include({ client_name: 'runner', run_id: 'run-stream-1' });
    });

    it('a kill command aborts pending side effects before on_kill; commands are deduped, logged, and missing hooks are no-ops', async () => {
      const t = await ing.tenant('killer');
      const dir = path.join(await tempDir(), 'bundle');
      const s = new DebugSession({ runId: 'run-kill', clientName: 'runner', outDir: dir, dsn: t.dsn, logger: collectingLogger() });
      s.recordStep({ step_index: 0, step_id: 'a' });
      const se1 = s.declareSideEffect({ stepIndex: 0, resource: 'cart', action: 'add' });
      const se2 = s.declareSideEffect({ stepIndex: 0, resource: 'order', action: 'submit' });
      const calls: string[] = [];
      let atKill: Array<SideEffect | undefined> = [];
      const adapter: Adapter = {
        onInjectHint: (text) => void calls.push(`hint:${text}`),
        onKill: () => {
          atKill = [s.sideEffect(se1), s.sideEffect(se2)];
          calls.push('kill');
        },
      };
      const handle = s.bindIntervention(adapter, 2);
      expect(handle).to.not.equal(null);
      const cookie = await ing.login(t);
      const post = (body: unknown) =>
        fetch(`${ing.url}/api/v1/runs/run-kill/commands`, { method: 'POST', headers: { cookie, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const pause = await post({ type: 'pause' });
      expect(pause.status).to.equal(201);
      expect((await body(pause)).command_id).to.match(/^cmd_/);
      expect((await post({ type: 'inject_hint', payload: { text: 'use search' } })).status).to.equal(201);
      expect((await post({ type: 'explode' })).status).to.equal(422);
      await until(() => calls.includes('hint:use search'));
      // at least once: the same commands delivered again are ignored (command_id dedupe)
      const again = await fetch(`${ing.url}/api/v1/runs/run-kill/commands?cursor=0&timeout=0`, { headers: { authorization: `Bearer ${t.key}` } });
      expect((await body(again)).commands).to.have.length(2);
      expect((await post({ type: 'kill' })).status).to.equal(201);
      await until(() => calls.includes('kill'));
      expect(calls).to.deep.equal(['hint:use search', 'kill']);
      expect(atKill.map((x) => x?.state)).to.deep.equal(['aborted', 'aborted']);
      expect(atKill[0]!.reason).to.match(/kill/);
      await s.close();
      const lines = (await readFile(path.join(dir, 'events/run.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
      expect(lines.map((e) => e.payload.type)).to.deep.equal(['pause', 'inject_hint', 'kill']);
      expect(new Set(lines.map((e) => e.operator_id)).size).to.equal(1);
      expect(lines[0].operator_id).to.match(/^usr_/);
      expect(lines.every((e) => e.layer === 'intervention' && e.kind === 'command')).to.equal(true);
      expect(await validateBundle(dir)).to.deep.equal([]);
    });

    it('without a DSN, bind_intervention returns null and append_log stays local', async () => {
      const dir = path.join(await tempDir(), 'b');
      const s = new DebugSession({ runId: 'r', clientName: 'c', outDir: dir, dsn: null, env: { TRACE_DSN: 'http://k@127.0.0.1:1' } });
      expect(s.bindIntervention({})).to.equal(null);
      expect(s.isStreaming).to.equal(false);
      await s.close();
      const env = new DebugSession({ runId: 'r2', clientName: 'c', outDir: path.join(dir, '..', 'e'), env: { TRACE_DSN: `http://k@127.0.0.1:1` }, stream: { flushTimeoutMs: 200 }, logger: collectingLogger() });
      expect(env.isStreaming).to.equal(true);
      await env.close();
    });
  });

  it('a server answering 429 twice makes the SDK drop after one retry; the local bundle stays complete', async () => {
    const hits: string[] = [];
    const ing = await startIngest({}, (inner) => (req: http.IncomingMessage, res: http.ServerResponse) => {
      if (req.method === 'PUT' && /\/runs\/r429\/steps\/0$/.test(req.url ?? '')) {
        hits.push(req.url!);
        res.writeHead(429, { 'Retry-After': '0', 'content-type': 'application/json' });
        res.end('{"detail":"busy"}');
        return;
      }
      inner(req, res);
    });
    try {
      const t = await ing.tenant('t429');
      const dir = path.join(await tempDir(), 'b');
      const log = collectingLogger();
      const s = new DebugSession({ runId: 'r429', clientName: 'c', outDir: dir, dsn: t.dsn, logger: log, stream: { batchMax: 1 } });
      s.recordStep({ step_index: 0, step_id: 'a', status: 'passed' });
      s.recordStep({ step_index: 1, step_id: 'b', status: 'passed' });
      await s.close();
      // the spec's rule: one retry, then dropped with a warning; close does not send it again
      expect(hits).to.have.length(2);
      expect(log.warnings.filter((w) => /429 twice; dropped PUT \/runs\/r429\/steps\/0/.test(w))).to.have.length(1);
      expect(s.dropLedger).to.deep.equal([{ kind: 'step', method: 'PUT', path: '/runs/r429/steps/0', reason: '429', recovered: false }]);
      expect(s.streamStats!.retried).to.be.greaterThan(0);
      expect(await validateBundle(dir)).to.deep.equal([]);
      expect(JSON.parse(await readFile(path.join(dir, 'trace.json'), 'utf8')).steps).to.have.length(2);
      const cookie = await ing.login(t);
      expect((await ing.get('/runs/r429/steps/0000.json', cookie)).status).to.equal(404);
      expect((await ing.get('/runs/r429/steps/0001.json', cookie)).status).to.equal(200);
    } finally {
      await ing.close();
    }
  });

  it('a 403 on model-io latches live model-io off for the session; everything else still streams', async () => {
    let modelioPosts = 0;
    const ing = await startIngest({}, (inner) => (req: http.IncomingMessage, res: http.ServerResponse) => {
      if (/\/modelio\//.test(req.url ?? '')) modelioPosts++;
      inner(req, res);
    });
    try {
      const t = await ing.tenant('nomodel', { modelio: false });
      const dir = path.join(await tempDir(), 'b');
      const log = collectingLogger();
      const s = new DebugSession({ runId: 'r403', clientName: 'c', outDir: dir, dsn: t.dsn, logger: log, stream: { batchMax: 1 } });
      s.recordStep({ step_index: 0, step_id: 'a' });
      await s.recordModelio({ request: { model: 'm', n: 1 }, response: { text: 'x' } }, { stepIndex: 0, layer: 'planner' });
      await until(() => s.streamStats!.modelio_latched);
      await s.recordModelio({ request: { model: 'm', n: 2 }, response: { text: 'y' } }, { stepIndex: 0, layer: 'planner' });
      await s.recordModelio({ request: { model: 'm', n: 3 }, response: { text: 'z' } }, { stepIndex: 0, layer: 'planner' });
      s.recordStep({ step_index: 1, step_id: 'b' });
      await s.close();
      expect(modelioPosts).to.equal(1);
      expect(log.warnings.some((w) => /403/.test(w))).to.equal(true);
      expect(await validateBundle(dir)).to.deep.equal([]);
      expect(JSON.parse(await readFile(path.join(dir, 'steps/0000.json'), 'utf8')).modelio).to.have.length(3);
      const cookie = await ing.login(t);
      expect((await ing.get('/runs/r403/steps/0001.json', cookie)).status).to.equal(200);
    } finally {
      await ing.close();
    }
  });
});
