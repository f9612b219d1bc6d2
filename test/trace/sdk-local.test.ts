import { expect } from 'chai';
import { readFile, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import {
  CAPTURE_MODES, DebugSession, MASK, RedactionPolicy, RuntimeError, ValueError, compareCaptureModes, resolveCaptureMode,
  shortId, sha256Hex, validateBundle, withDebugSession, RulesEngine, BundleContext, rule, ModelApiAdapterBase, FileStore,
} from '../../sdk/index.ts';
import { TRACE_SCHEMA_FILES, traceSchemaBytes } from '../../schemas/trace/index.ts';
import { phash64 } from '../../sdk/phash.ts';
import { collectingLogger, png, tempDir } from '../support/trace.ts';

const readJson = async (file: string) => JSON.parse(await readFile(file, 'utf8'));

describe('trace SDK, local bundle', () => {
  it('orders capture modes and resolves the explicit value, then TRACE_CAPTURE_MODE, then off', () => {
    expect(CAPTURE_MODES).to.deep.equal(['off', 'metadata', 'trace', 'screenshots', 'video', 'model_io', 'dispatch', 'replay', 'full']);
    expect(compareCaptureModes('screenshots', 'trace')).to.be.greaterThan(0);
    expect(compareCaptureModes('metadata', 'full')).to.be.lessThan(0);
    expect(resolveCaptureMode('trace', { TRACE_CAPTURE_MODE: 'full' })).to.equal('trace');
    expect(resolveCaptureMode(null, { TRACE_CAPTURE_MODE: 'Model_IO' })).to.equal('model_io');
    expect(resolveCaptureMode(undefined, {})).to.equal('off');
    expect(resolveCaptureMode(undefined, { TRACE_CAPTURE_MODE: 'bogus' })).to.equal('off');
    expect(() => resolveCaptureMode('bogus', {})).to.throw(ValueError);
  });

  it('redacts with default-pii-v1: drops, masks, redactors, droppers; keeps a logprob token', () => {
    const p = RedactionPolicy.default();
    expect(p.id).to.equal('default-pii-v1');
    const out = p.apply({
      headers: { Authorization: 'Bearer abcdefghijkl', cookie: 'x' },
      email: 'a@b.com',
      note: 'write to joe@example.org, card 4111 1111 1111 1111',
      logprobs: [{ token: 'Hello', token_id: 5, logprob: -0.1 }],
      token: 'sekrit',
    }) as Record<string, unknown>;
    expect(out.headers).to.deep.equal({});
    expect(out.email).to.equal(MASK);
    expect(out.token).to.equal(MASK);
    expect(out.note).to.equal('write to ***REDACTED:email***, card ***REDACTED:card***');
    expect((out.logprobs as Array<{ token: string }>)[0]!.token).to.equal('Hello');
    p.addRedactor((v) => v.replace(/ACME-\d+/g, '[acct]')).addDropper((k) => k === 'debug_blob');
    expect(p.apply({ a: 'ACME-42', debug_blob: 'x' })).to.deep.equal({ a: '[acct]' });
    p.addReasoningRedactor((v) => v.replace(/secret plan/g, '[plan]'));
    expect(p.applyReasoning('my secret plan')).to.equal('my [plan]');
  });

  it('redacts long token-like strings in one pass: a data URL or a long token is no hang, and an address inside it is still found', function () {
    // the e-mail redactor once rescanned such a run from each of its characters: about 15 s here, longer than the timeout
    // (mocha fails a synchronous test that overran it once it returns), quadratic beyond (1 MB: about 45 min)
    this.timeout(5_000);
    const blob = Buffer.alloc(48 * 1024, 'runplane').toString('base64');
    const p = RedactionPolicy.default();
    const out = p.apply({ messages: [{ content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${blob}` } }, { type: 'text', text: `${'x'.repeat(60_000)} mail ops@example.com or ${'7'.repeat(60_000)}@` }] }] }) as {
      messages: Array<{ content: [{ image_url: { url: string } }, { text: string }] }>;
    };
    expect(out.messages[0]!.content[0].image_url.url).to.equal(`data:image/png;base64,${blob}`);
    expect(out.messages[0]!.content[1].text).to.equal(`${'x'.repeat(60_000)} mail ***REDACTED:email*** or ${'7'.repeat(60_000)}@`);
    // the same addresses as before: each found from the first character of its run
    expect(p.apply('to: a.b+c@mail.example.org,x_y@z.io;not@x and (joe@ex.com)')).to.equal('to: ***REDACTED:email***,***REDACTED:email***;not@x and (***REDACTED:email***)');
  });

  it('writes the layout of the spec, embeds byte-identical schemas and validates', async () => {
    const dir = path.join(await tempDir(), 'bundle');
    const log = collectingLogger();
    const s = new DebugSession({ runId: 'run-1', clientName: 'test', outDir: dir, dsn: null, captureMode: 'screenshots', logger: log, tags: { team: 'a' } });
    expect(s.debugSessionId).to.match(/^dbg_[0-9a-f]{12}$/);
    s.recordStep({ step_index: 0, step_id: 's0', status: 'passed', action: { type: 'CLICK', params: { x: 3, y: 4 } } });
    const pre = await png(1);
    expect(await s.attachObservation(0, 'pre', pre)).to.equal('screenshots/0000_pre.png');
    await s.attachObservation(0, 'post', await png(2));
    s.recordStep({ step_index: 0, step_id: 's0-retry', status: 'failed' });
    expect(log.warnings.join()).to.match(/deprecated/);
    s.recordStepIteration('s0', { step_id: 's0-third', status: 'passed' });
    expect(() => s.recordStepIteration(0, { step_id: 's0' })).to.throw(ValueError);
    expect(() => s.recordStepIteration(9, { step_id: 'x' })).to.throw(ValueError);
    s.setCaptureMode('full');
    s.recordStep({ step_index: 1, step_id: 's1', status: 'failed', failure_class: 'selector_miss' });
    s.recordStep({ step_index: 2, step_id: 's2', status: 'passed', capture_mode: 'trace' });
    s.recordEvent({ layer: 'planner', kind: 'propose', step_index: 1, payload: { plan: 'x' } });
    s.recordEvent({ layer: 'recovery', kind: 'retry', recovery_type: 'retry' });
    s.appendLog('run line\n');
    s.appendLog('step line\n', { stepIndex: 1 });
    s.recordReasoning(1, 'because', { tokens: 3, format: 'claude_extended_thinking', model: 'm' });
    s.markForEval(1, { reason: 'odd' });
    s.markForEval(1, { reason: 'second' });
    s.recordPreference(1, { preferred: 'a', rationale: 'shorter' });
    const m = await s.close();
    expect(m.run_id).to.equal('run-1');
    expect(m.trajectory_fingerprint).to.match(/^[0-9a-f]{64}$/);
    expect(await validateBundle(dir)).to.deep.equal([]);
    const files = new Set(m.paths);
    for (const f of ['steps/0000.json', `steps/0000/${shortId('s0')}.json`, `steps/0000/${shortId('s0-retry')}.json`, `steps/0000/${shortId('s0-third')}.json`, 'steps/0001.json',
      'events/0001.jsonl', 'events/run.jsonl', 'events/reasoning.jsonl', 'screenshots/0000_pre.png', 'screenshots/0000_post.png', 'logs/run.log', 'logs/step-1.log',
      'eval_candidates.json', 'outcomes.json', 'preferences/0001.json', 'diagnostics/findings.json', 'trace.json']) expect(files, f).to.include(f);
    expect(shortId('s0')).to.equal(sha256Hex('s0').slice(0, 8));
    for (const f of TRACE_SCHEMA_FILES) expect((await readFile(path.join(dir, 'schema', f))).equals(traceSchemaBytes(f)), f).to.equal(true);
    expect((await readFile(path.join(dir, 'screenshots/0000_pre.png'))).equals(pre)).to.equal(true);
    const step0 = await readJson(path.join(dir, 'steps/0000.json'));
    expect(step0.step_id).to.equal('s0');
    expect(step0.step_iterations).to.equal(3);
    expect(step0.capture_mode).to.equal('screenshots');
    expect(step0.observation.hashes.phash_64).to.match(/^[0-9a-f]{16}$/);
    expect((await readJson(path.join(dir, 'steps/0001.json'))).capture_mode).to.equal('full');
    expect((await readJson(path.join(dir, 'steps/0002.json'))).capture_mode).to.equal('trace');
    expect(await readJson(path.join(dir, 'eval_candidates.json'))).to.have.length(1).and.nested.property('[0].reason', 'odd');
    const trace = await readJson(path.join(dir, 'trace.json'));
    expect(trace.steps.map((x: { step_index: number }) => x.step_index)).to.deep.equal([0, 1, 2]);
    expect(trace.session.status).to.equal('passed');
    expect(trace.session.tags).to.deep.equal({ team: 'a' });
    // the atomic write leaves nothing beside the bundle
    expect((await readdir(path.dirname(dir))).filter((n) => n.includes('partial'))).to.deep.equal([]);
  });

  it('hashes each post image: the same bytes as the step before give its hash, other bytes their own', async () => {
    const dir = path.join(await tempDir(), 'bundle');
    const s = new DebugSession({ runId: 'run-h', clientName: 'test', outDir: dir, dsn: null, captureMode: 'screenshots', logger: collectingLogger() });
    const [a, b] = [await png(3, 320, 200), await png(4, 320, 200)];
    // a, a again (a copy, not the same Buffer), b, then a after b: the hash of a is not held over b
    const posts = [a, Buffer.from(a), b, a];
    for (const [i, image] of posts.entries()) {
      s.recordStep({ step_index: i, status: 'passed' });
      await s.attachObservation(i, 'post', image);
    }
    await s.close();
    const hashes: string[] = [];
    for (let i = 0; i < posts.length; i++) hashes.push((await readJson(path.join(dir, `steps/${String(i).padStart(4, '0')}.json`))).observation.hashes.phash_64);
    const [ha, hb] = [await phash64(a), await phash64(b)];
    expect(ha).to.not.equal(hb);
    expect(hashes).to.deep.equal([ha, ha, hb, ha]);
  });

  it('verdicts: attach_verifier composes its reason and adds a rule judge; judge promotion; scores clamp; inferred default', async () => {
    const dir = path.join(await tempDir(), 'b');
    const s = new DebugSession({ runId: 'r', clientName: 't', outDir: dir, dsn: null });
    s.recordStep({ step_index: 0, step_id: 'a', status: 'passed', verdict: { status: 'passed', reason: 'native' } });
    s.recordStep({ step_index: 1, step_id: 'b', status: 'failed' });
    s.recordStep({ step_index: 2, step_id: 'c', status: 'passed' });
    expect(() => s.attachVerifier(7, { status: 'passed' })).to.throw(ValueError);
    const v = s.attachVerifier(0, { status: 'failed', check: 'title', expected: 'Home', actual: 'Login' });
    expect(v.reason).to.equal('title: expected "Home", actual "Login"');
    const d = s.recordJudgeDecision(1, { judgeId: 'j1', judgeType: 'model', verdict: { status: 'passed' }, confidence: 0.8 });
    s.recordJudgeDecision(1, { judgeId: 'j2', judgeType: 'human', verdict: { status: 'failed' }, promote: false });
    expect(d.judged_at).to.be.a('string');
    const scored = s.setScore(1, 1.7, { comparator: 'model-judge', components: { progress: 0.5, custom: 2 }, shouldStop: true, uncertainty: -3 });
    expect(scored.score).to.equal(1);
    expect(scored.uncertainty).to.equal(0);
    expect(() => s.setScore(1, 0.5, { comparator: 'oracle' as never })).to.throw(ValueError, /comparator/);
    expect(() => s.setScore(9, 0.5)).to.throw(ValueError);
    await s.close();
    const [a, b, c] = await Promise.all(['0000', '0001', '0002'].map((n) => readJson(path.join(dir, `steps/${n}.json`))));
    expect(a.verdict.status).to.equal('failed');
    expect(a.verdict_source).to.equal('rule:attach_verifier');
    expect(a.judge_decisions[0]).to.include({ judge_id: 'attach_verifier', judge_type: 'rule' });
    expect(b.verdict_source).to.equal('model:j1');
    expect(b.verdict).to.include({ status: 'passed', score: 1, should_stop: true, comparator: 'model-judge' });
    expect(b.judge_decisions).to.have.length(2);
    expect(c.verdict).to.deep.equal({ status: 'passed' });
    expect(c.verdict_source).to.equal('inferred');
    expect(await validateBundle(dir)).to.deep.equal([]);
  });

  it('costs merge; outcomes roll up step costs under session costs; the successful task summary', async () => {
    const dir = path.join(await tempDir(), 'b');
    const s = new DebugSession({ runId: 'r', clientName: 't', outDir: dir, dsn: null });
    s.recordStep({ step_index: 0, step_id: 'a' });
    s.recordStep({ step_index: 1, step_id: 'b' });
    expect(() => s.setStepCosts(5, { total_usd: 1 })).to.throw(ValueError);
    s.setStepCosts(0, { total_usd: 0.25, tokens_in: 100 });
    s.setStepCosts(0, { tokens_out: 7 });
    s.setStepCosts(1, { total_usd: 0.5, tokens_in: 50 });
    expect(() => s.setCosts({ tokens_in: 1.5 })).to.throw(ValueError);
    s.setCosts({ gpu_usd: 0.2 });
    s.setCosts({ total_usd: 2 });
    expect(s.successfulTaskCostSummary()).to.equal(null);
    const o = s.finalizeOutcome({ verdict: { status: 'passed' }, taskClass: 'search' });
    expect(o.cost_summary).to.deep.equal({ total_usd: 2, tokens_in: 150, tokens_out: 7, gpu_usd: 0.2 });
    s.finalizeOutcome({ scope: 'step', stepIndex: 1, verdict: { status: 'failed' } });
    expect(s.successfulTaskCostSummary()).to.deep.equal(o.cost_summary);
    const m = await s.close();
    expect(m.costs).to.deep.equal(o.cost_summary);
    const outcomes = await readJson(path.join(dir, 'outcomes.json'));
    expect(outcomes.map((x: { scope: string }) => x.scope)).to.deep.equal(['session', 'step']);
    expect(outcomes[1].cost_summary).to.deep.equal({ total_usd: 0.5, tokens_in: 50 });
  });

  it('model-io: validated, redacted, idempotent on prompt_hash, stamps versions; logprobs semantics', async () => {
    const dir = path.join(await tempDir(), 'b');
    const s = new DebugSession({ runId: 'r', clientName: 't', outDir: dir, dsn: null, captureLogprobs: true });
    s.recordStep({ step_index: 3, step_id: 'a' });
    const rec = { request: { model: 'gpt-x', messages: [{ role: 'user', content: 'mail me at a@b.co' }], api_key: 'k' }, response: { text: 'ok' } };
    const p1 = await s.recordModelio(rec, { stepIndex: 3, layer: 'planner' });
    expect(p1).to.equal('modelio/0003-planner-0.json');
    expect(await s.recordModelio(rec, { stepIndex: 3, layer: 'planner' })).to.equal(p1);
    const p2 = await s.recordModelio({ request: { model: 'gpt-x', n: 2 }, response: { text: 'b', logprobs: [{ token: 'b', token_id: null, logprob: -1 }] } }, { layer: 'grounding' });
    expect(p2).to.equal('modelio/run-grounding-0.json');
    let err: unknown;
    try {
      await s.recordModelio({ request: {}, response: {} }, { layer: 'planner' });
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(ValueError);
    await s.close();
    const stored = await readJson(path.join(dir, p1));
    expect(stored.response.logprobs).to.deep.equal([]);
    expect(stored.request.messages[0].content).to.equal('mail me at ***REDACTED:email***');
    expect(stored.request).to.not.have.property('api_key');
    expect(stored.prompt_hash).to.match(/^[0-9a-f]{64}$/);
    expect(stored.redaction_applied).to.equal('default-pii-v1');
    const kept = await readJson(path.join(dir, p2));
    expect(kept.response.logprobs[0].token).to.equal('b');
    const step = await readJson(path.join(dir, 'steps/0003.json'));
    expect(step.captured_versions).to.deep.equal({ model: 'gpt-x', prompt_hash: stored.prompt_hash });
    const off = new DebugSession({ runId: 'r2', clientName: 't', outDir: path.join(dir, '..', 'c'), dsn: null });
    const p3 = await off.recordModelio({ request: { model: 'm' }, response: { text: 'x' } }, { layer: 'planner' });
    await off.close();
    expect(await readJson(path.join(dir, '..', 'c', p3))).to.not.have.nested.property('response.logprobs');
  });

  it('side-effect ledger, task spec, subgoals, loop flag, versions, env fingerprint, group id', async () => {
    const dir = path.join(await tempDir(), 'b');
    const log = collectingLogger();
    const s = new DebugSession({ runId: 'r', clientName: 't', outDir: dir, dsn: null, logger: log, groupId: 'g1',
      taskSpec: { task_spec_id: 'ts1', instruction: 'buy', subgoals: [{ subgoal_id: 'cart' }, { subgoal_id: 'pay', parent_subgoal_id: 'cart' }] } });
    s.recordStep({ step_index: 0, step_id: 'a' });
    s.recordStep({ step_index: 1, step_id: 'b', group_id: 'own' });
    const a = s.declareSideEffect({ stepIndex: 0, resource: 'cart', action: 'add' });
    const b = s.declareSideEffect({ stepIndex: 1, resource: 'order', action: 'submit', reversibility: 'compensated', compensationHandle: 'refund:1' });
    const c = s.declareSideEffect({ stepIndex: 1, resource: 'mail', action: 'send' });
    s.commitSideEffect(a, { confirmation: 'ok', email: 'x@y.z' });
    s.markSideEffectAborted(b, 'validation failed');
    expect(() => s.commitSideEffect(b)).to.throw(ValueError);
    expect(s.abortPendingSideEffects('kill')).to.deep.equal([c]);
    expect(s.sideEffect(a)!.observed_result).to.deep.equal({ confirmation: 'ok', email: MASK });
    s.recordSubgoalCompletion(0, 'cart', 0.5);
    s.recordSubgoalCompletion(1, 'cart', 1);
    s.recordSubgoalCompletion(1, 'unknown-goal', 1);
    expect(log.warnings.join()).to.match(/unknown-goal/);
    s.setLoopDetected(1);
    s.setStepVersions(0, { grounder: 'g-v2', code_git_sha: 'abc' });
    s.attachEnvFingerprint(0, { url_host: 'shop.test', url_path_template: '/p/{id}', api_shapes: { '/api': 'h1' }, extensions: [] });
    expect(() => s.setLoopDetected(8)).to.throw(ValueError);
    s.setTaskSpecId('ts2');
    await s.close();
    expect(await validateBundle(dir)).to.deep.equal([]);
    const ses = (await readdir(path.join(dir, 'side_effects'))).sort();
    expect(ses).to.deep.equal([`0000-${a}.json`, `0001-${b}.json`, `0001-${c}.json`].sort());
    expect((await readJson(path.join(dir, 'side_effects', `0001-${b}.json`))).reason).to.equal('validation failed');
    const [s0, s1] = await Promise.all(['0000', '0001'].map((n) => readJson(path.join(dir, `steps/${n}.json`))));
    expect(s0.group_id).to.equal('g1');
    expect(s1.group_id).to.equal('own');
    expect(s1.loop_detected).to.equal(true);
    expect(s1.subgoals_completed.find((x: { subgoal_id: string }) => x.subgoal_id === 'cart')).to.deep.equal({ subgoal_id: 'cart', completion: 1, first_completed_at_step: 1 });
    expect(s0.captured_versions).to.deep.equal({ grounder: 'g-v2', code_git_sha: 'abc' });
    expect(s0.env_fingerprint.url_host).to.equal('shop.test');
    expect((await readJson(path.join(dir, 'trace.json'))).session.task_spec_id).to.equal('ts2');
  });

  it('an exception inside withDebugSession closes the run as halted and still writes a valid bundle', async () => {
    const dir = path.join(await tempDir(), 'b');
    let caught: unknown;
    try {
      await withDebugSession({ runId: 'r', clientName: 't', outDir: dir, dsn: null }, async (s) => {
        s.recordStep({ step_index: 0, step_id: 'a', status: 'running' });
        throw new Error('agent crashed');
      });
    } catch (err) {
      caught = err;
    }
    expect((caught as Error).message).to.equal('agent crashed');
    expect((await readJson(path.join(dir, 'manifest.json'))).status).to.equal('halted');
    expect(await validateBundle(dir)).to.deep.equal([]);
    const ok = path.join(dir, '..', 'ok');
    expect(await withDebugSession({ runId: 'r2', clientName: 't', outDir: ok, dsn: null }, () => 42)).to.equal(42);
    expect((await readJson(path.join(ok, 'manifest.json'))).status).to.equal('passed');
  });

  it('await using closes the session on leaving the block', async () => {
    const dir = path.join(await tempDir(), 'b');
    {
      await using s = new DebugSession({ runId: 'r', clientName: 't', outDir: dir, dsn: null });
      s.setStatus('failed');
    }
    expect((await readJson(path.join(dir, 'manifest.json'))).status).to.equal('failed');
    expect((await stat(path.join(dir, 'trace.json'))).isFile()).to.equal(true);
  });

  it('branch_from: replay copies the prefix and screenshots; sandbox stamps linkage; auto; action refused for replay', async () => {
    const root = await tempDir();
    const parentDir = path.join(root, 'parent');
    const parent = new DebugSession({ runId: 'p1', clientName: 't', outDir: parentDir, dsn: null });
    const shots: Buffer[] = [];
    for (let i = 0; i < 4; i++) {
      parent.recordStep({ step_index: i, step_id: `p${i}`, status: 'passed', action: { type: 'CLICK', params: { x: i, y: i } } });
      shots.push(await png(10 + i));
      await parent.attachObservation(i, 'pre', shots[i]!);
    }
    await parent.close();
    let err: unknown;
    try {
      await DebugSession.branchFrom({ parentRunId: 'p1', branchPointStepIndex: 2, mutatedAxis: 'action', mode: 'replay', parentBundle: parentDir, clientName: 't', outDir: path.join(root, 'x'), dsn: null });
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(ValueError);
    const auto = await DebugSession.branchFrom({ parentRunId: 'p1', branchPointStepIndex: 2, mutatedAxis: 'action', mutation: { x: 9 }, clientName: 't', outDir: path.join(root, 'sandbox'), dsn: null });
    expect(auto.branchMode).to.equal('sandbox');
    expect(auto.runId).to.match(/^p1:branch:[0-9a-f]{8}$/);
    await auto.close();
    expect(await readdir(path.join(root, 'sandbox', 'steps')).catch(() => [])).to.deep.equal([]);
    expect((await readJson(path.join(root, 'sandbox', 'manifest.json'))).branch_context).to.include({ parent_run_id: 'p1', mutated_axis: 'action', branch_mode: 'sandbox' });
    const replay = await DebugSession.branchFrom({ parentRunId: 'p1', branchPointStepIndex: 2, mutatedAxis: 'model', mutation: { model: 'b' }, parentBundle: parentDir, clientName: 't', outDir: path.join(root, 'replay'), dsn: null });
    expect(replay.branchMode).to.equal('replay');
    replay.recordStep({ step_index: 2, step_id: 'new2', status: 'passed' });
    await replay.close();
    const dir = path.join(root, 'replay');
    expect(await validateBundle(dir)).to.deep.equal([]);
    expect((await readdir(path.join(dir, 'screenshots'))).sort()).to.deep.equal(['0000_pre.png', '0001_pre.png']);
    expect((await readFile(path.join(dir, 'screenshots/0001_pre.png'))).equals(shots[1]!)).to.equal(true);
    const trace = await readJson(path.join(dir, 'trace.json'));
    expect(trace.steps.map((x: { step_id: string }) => x.step_id)).to.deep.equal(['p0', 'p1', 'new2']);
    expect(trace.steps[2].branch_context).to.deep.equal({ parent_run_id: 'p1', branch_point_step_index: 2, mutated_axis: 'model', branch_id: replay.runId });
    expect(trace.steps[2].branch_context).to.not.have.property('mutation');
    expect(trace.session.branch_context.mutation).to.deep.equal({ model: 'b' });
    expect((await readJson(path.join(dir, 'replay/0001.prior.json'))).step_id).to.equal('p1');
  });

  it('an orchestrator refuses steps, iterations and observations', async () => {
    const o = DebugSession.openOrchestrator({ runId: 'o', clientName: 't', outDir: path.join(await tempDir(), 'o'), dsn: null, sessionName: 'fleet', tenantId: 'acme' });
    expect(o.isOrchestrator).to.equal(true);
    expect(() => o.recordStep({ step_index: 0 })).to.throw(RuntimeError);
    expect(() => o.recordStepIteration(0, {})).to.throw(RuntimeError);
    let err: unknown;
    try {
      await o.attachObservation(0, 'pre', await png(1));
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(RuntimeError);
    o.recordEvent({ layer: 'orchestrator', kind: 'note' });
    const m = await o.close();
    expect(m.tags).to.include({ session_type: 'orchestrator', session_name: 'fleet', tenant_id: 'acme' });
  });

  it('diagnostics: custom rules through the rule decorator; a throwing rule becomes an error finding; validate_bundle reports tampering', async () => {
    const dir = path.join(await tempDir(), 'b');
    const s = new DebugSession({ runId: 'r', clientName: 't', outDir: dir, dsn: null });
    s.recordStep({ step_index: 0, step_id: 'a', status: 'failed', grounding: { provenance: 'dom' }, action: { type: 'CLICK', params: { x: 1, y: 1 } } });
    await s.close();
    const findings = await readJson(path.join(dir, 'diagnostics/findings.json'));
    expect(findings.findings.map((f: { rule_id: string }) => f.rule_id).sort()).to.deep.equal(['dom-grounded-target', 'uncategorized-failure']);
    const slow = rule({ id: 'many-steps', severity: 'info' })((ctx, out) => {
      if (ctx.steps.length >= 1) out.emit('has steps', { step_index: 0 });
    });
    const broken = rule({ id: 'broken' })(() => {
      throw new Error('boom');
    });
    const result = await new RulesEngine([slow, broken], ['custom']).evaluate(await BundleContext.load(dir));
    expect(result.findings).to.deep.equal([
      { rule_id: 'many-steps', severity: 'info', message: 'has steps', step_index: 0 },
      { rule_id: 'broken', severity: 'error', message: 'rule failed: boom', step_index: null },
    ]);
    await new FileStore(dir).openWriteText('steps/0000.json').then(async (w) => {
      w.write('{"step_index": "zero"}');
      await w.close();
    });
    const issues = await validateBundle(dir);
    expect(issues.map((i) => i.where)).to.include('steps/0000.json');
    expect(issues.some((i) => /signature/.test(i.message))).to.equal(true);
  });

  it('ModelApiAdapterBase reads the chat-completions shapes', () => {
    const a = new ModelApiAdapterBase();
    const response = {
      choices: [{ message: { content: 'hi', reasoning_content: 'think', tool_calls: [{ id: 't1', function: { name: 'click', arguments: '{"x":1}' } }] }, logprobs: { content: [{ token: 'hi', logprob: -0.2, top_logprobs: [{ token: 'ho', logprob: -2 }] }] } }],
      usage: { prompt_tokens: 3 },
    };
    expect([...a.iterToolCalls(response)]).to.deep.equal([{ id: 't1', name: 'click', arguments: { x: 1 } }]);
    expect(a.extractReasoningFromResponse(response)).to.equal('think');
    expect(a.extractLogprobsFromResponse(response)).to.deep.equal([{ token: 'hi', token_id: null, logprob: -0.2, top_alternatives: [{ token: 'ho', token_id: null, logprob: -2 }] }]);
    expect(a.extractLogprobsFromResponse({ choices: [{ message: {} }] })).to.equal(null);
    const rec = a.bundleFromInput({ model: 'm', messages: [{ role: 'user', content: 'x' }] }, response, 'planner');
    expect(rec.request.model).to.equal('m');
    expect(rec.response.text).to.equal('hi');
  });
});
