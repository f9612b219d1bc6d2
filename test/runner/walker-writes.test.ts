// The walker's writes to the store of record (issue 15): a top-level step's
// checkpoint rides with its step.started and the periodic save with a
// step.finished, each one fenced write; once the runner's lease is gone, the
// next fenced write stops the run and no event of it reaches the log.
import { expect } from 'chai';
import { Walker } from '../../gateway/runner/walker.ts';
import { RunState } from '../../gateway/runner/run-state.ts';
import type { RunnerDeps, RunnerStore } from '../../gateway/runner/deps.ts';
import type { Plane, Step, StepHandler, StepResult } from '../../gateway/plugins/contract.ts';
import type { RunRecord } from '../../gateway/runs/records.ts';
import type { RunRecording } from '../../gateway/runner/recording.ts';
import { Halt } from '../../gateway/runner/outcome.ts';

interface Write {
  kind: 'save' | 'emit' | 'saveAndEmit';
  type?: string;
  path?: unknown;
  checkpoint?: number;
}

/** A store that logs each write; the fenced ones are refused once `lost` is set, as the SQL stores refuse them. */
function fakeStore() {
  const writes: Write[] = [];
  const s = { writes, lost: false };
  const store: Pick<RunnerStore, 'save' | 'emitFenced' | 'saveAndEmit'> = {
    async save(r) {
      if (s.lost) return false;
      writes.push({ kind: 'save', checkpoint: r.checkpoint_step });
      return true;
    },
    async emitFenced(_r, _owner, type, data) {
      if (s.lost) return false;
      writes.push({ kind: 'emit', type, path: data.path });
      return true;
    },
    async saveAndEmit(r, _owner, type, data) {
      if (s.lost) return false;
      writes.push({ kind: 'saveAndEmit', type, path: data.path, checkpoint: r.checkpoint_step });
      return true;
    },
  };
  return { s, store };
}

/** A recording that keeps each step's index and the text of its pre and post screenshots. */
function recording(): { rec: RunRecording; recorded: Array<{ index: number; pre?: string; post?: string }> } {
  const recorded: Array<{ index: number; pre?: string; post?: string }> = [];
  const rec = {
    wantsScreenshots: true,
    decision() {},
    declareSideEffect: () => '',
    settleSideEffect() {},
    modelIo() {},
    close: async () => undefined,
    async step(st: { index: number }, shot: { pre?: Buffer; post?: Buffer }) {
      recorded.push({ index: st.index, pre: shot.pre?.toString(), post: shot.post?.toString() });
    },
  } as unknown as RunRecording;
  return { rec, recorded };
}

function walker(store: Pick<RunnerStore, 'save' | 'emitFenced' | 'saveAndEmit'>, run: (ctx: { path: string }) => Promise<StepResult>, o: { plane?: Partial<Plane>; rec?: RunRecording; checks?: StepHandler['checks'] } = {}): { w: Walker; st: RunState } {
  const handler: StepHandler = { types: ['*'], description: 'test', run: (ctx) => run(ctx), ...(o.checks ? { checks: o.checks } : {}) };
  const deps = {
    store,
    handler: () => handler,
    brain: () => undefined,
    callTool: async () => undefined,
    recipe: async () => ({}),
    metrics: { loopTermination() {} },
    log: { warn() {}, error() {}, info() {} },
    dataDir: '/nonexistent',
    owner: 'me',
    leaseMs: 60_000,
    maxLoopIterations: 10,
    maxRunSteps: 100,
    stepTimeoutMs: 5_000,
  } as unknown as RunnerDeps;
  const plane = {
    capabilities: { backend: 'computer_plane', dom_aware: false },
    screenshot: async () => ({ image: Buffer.alloc(0), format: 'png' }),
    act: async () => ({}),
    facts: async () => ({ url: 'http://fixture.test/', title: 'fixture' }),
    ...o.plane,
  } as unknown as Plane;
  const record = {
    run_id: 'walk-1',
    tenant_id: 't',
    status: 'running',
    cua_model: 'none',
    runtime: { compute_backend: 'computer_plane', max_cost: 10 },
    events: [],
    steps: [],
    start_step: 0,
  } as unknown as RunRecord;
  const st = new RunState();
  const w = new Walker(deps, record, plane, st, new AbortController().signal, () => undefined, { isLost: () => undefined }, o.rec);
  return { w, st };
}

const steps = (n: number): Step[] => Array.from({ length: n }, (_, i) => ({ intent: `step ${i}`, type: 'click' }) as Step);

describe('the walker writes a step in as few fenced writes as it can', () => {
  it('saves each top-level checkpoint with its step.started and the first progress with a step.finished: two writes a step', async () => {
    const { s, store } = fakeStore();
    const { w } = walker(store, async () => ({ success: true }));
    expect(await w.walk(steps(5), 'steps')).to.equal('ok');
    const started = s.writes.filter((x) => x.type === 'step.started');
    // step 0 needs no checkpoint: the run was saved running at step 0 before the walk
    expect(started.map((x) => [x.kind, x.checkpoint])).to.deep.equal([['emit', undefined], ...[1, 2, 3, 4].map((i) => ['saveAndEmit', i])]);
    expect(s.writes.filter((x) => x.kind === 'save'), 'no save of its own').to.deep.equal([]);
    // the first step.finished carries the progress (nothing was saved yet); the later ones within SAVE_EVERY_MS are plain events
    expect(s.writes.filter((x) => x.type === 'step.finished').map((x) => x.kind)).to.deep.equal(['saveAndEmit', 'emit', 'emit', 'emit', 'emit']);
    expect(s.writes.length).to.equal(10);
  });

  it('saves a failed step with its step.finished at once', async () => {
    const { s, store } = fakeStore();
    const { w } = walker(store, async (ctx) => (ctx.path === 'steps[1]' ? { success: false, failure_class: 'unknown', retryable: false } : { success: true }));
    await w.walk(steps(3), 'steps');
    expect(s.writes.filter((x) => x.type === 'step.finished').map((x) => [x.path, x.kind])).to.deep.equal([
      ['steps[0]', 'saveAndEmit'],
      ['steps[1]', 'saveAndEmit'],
      ['steps[2]', 'emit'],
    ]);
  });

  it('stops at the next fenced write once the lease is gone, and appends no event of the refused step', async () => {
    const { s, store } = fakeStore();
    // recovery takes the run while steps[1] acts
    const { w, st } = walker(store, async (ctx) => {
      if (ctx.path === 'steps[1]') s.lost = true;
      return { success: true };
    });
    let err: unknown;
    await w.walk(steps(4), 'steps').catch((e: unknown) => (err = e));
    expect(err).to.be.instanceOf(Halt);
    expect((err as Halt).haltClass).to.equal('runner_lost');
    // steps[1] finished within SAVE_EVERY_MS: its step.finished is an event between saves, fenced as they are, so refused
    expect(s.writes.map((x) => `${x.kind} ${x.type ?? ''} ${String(x.path ?? '')}`.trim())).to.deep.equal([
      'emit step.started steps[0]',
      'saveAndEmit step.finished steps[0]',
      'saveAndEmit step.started steps[1]',
    ]);
    expect(st.steps.map((e) => e.path), 'no halt entry for a run this runner lost').to.deep.equal(['steps[0]', 'steps[1]']);
  });

  it('appends no step.finished for a failed step once the lease is gone', async () => {
    const { s, store } = fakeStore();
    const { w } = walker(store, async (ctx) => {
      if (ctx.path === 'steps[1]') {
        s.lost = true;
        return { success: false, failure_class: 'unknown', retryable: false };
      }
      return { success: true };
    });
    let err: unknown;
    await w.walk(steps(3), 'steps').catch((e: unknown) => (err = e));
    expect((err as Halt).haltClass).to.equal('runner_lost');
    expect(s.writes.filter((x) => x.path === 'steps[1]').map((x) => x.type)).to.deep.equal(['step.started']);
  });

  it("takes a step's post screenshot while its writes go on, and lets the next step act only once it is taken", async () => {
    const { s, store } = fakeStore();
    const log: string[] = [];
    let shots = 0;
    const plane = {
      // a slow frame: each screenshot takes 60 ms, and shows which screenshot it was
      screenshot: async () => {
        const n = shots++;
        log.push(`shot ${n} asked`);
        await new Promise((r) => setTimeout(r, 60));
        log.push(`shot ${n} taken`);
        return { image: Buffer.from(`shot ${n}`), format: 'png' as const, width: 1, height: 1, scroll_y: 0, captured_at_ms: Date.now() };
      },
    };
    const { rec, recorded } = recording();
    const origEmit = store.emitFenced.bind(store);
    store.emitFenced = async (r, owner, type, data) => {
      log.push(`${type} ${String(data.path)}`);
      return origEmit(r, owner, type, data);
    };
    const { w } = walker(store, async (ctx) => {
      log.push(`act ${ctx.path}`);
      return { success: true };
    }, { plane, rec });
    await w.walk(steps(3), 'steps');
    await w.settled();
    // shot 0 is the first step's pre; shot k+1 the post of step k
    for (const k of [0, 1]) {
      expect(log.indexOf(`act steps[${k + 1}]`), `step ${k + 1} acts after the post of step ${k} was taken`).to.be.greaterThan(log.indexOf(`shot ${k + 1} taken`));
    }
    // the step's event did not wait for its screenshot
    expect(log.indexOf('step.finished steps[1]')).to.be.lessThan(log.indexOf('shot 2 taken'));
    expect(recorded).to.deep.equal([
      { index: 0, pre: 'shot 0', post: 'shot 1' },
      { index: 1, pre: 'shot 1', post: 'shot 2' },
      { index: 2, pre: 'shot 2', post: 'shot 3' },
    ]);
    expect(s.writes.filter((x) => x.type === 'step.finished')).to.have.length(3);
  });
  it('reads the page before an action beside the previous post screenshot, acts only once it is taken, and takes the post after its own checks looked', async () => {
    const { store } = fakeStore();
    const log: string[] = [];
    let shots = 0;
    let clicks = 0;
    const plane = {
      capabilities: { backend: 'dom_plane', dom_aware: true },
      screenshot: async () => {
        const n = shots++;
        log.push(`shot ${n} asked`);
        await new Promise((r) => setTimeout(r, 60));
        log.push(`shot ${n} taken`);
        return { image: Buffer.from(`shot ${n} of ${clicks} clicks`), format: 'png' as const, width: 1, height: 1, scroll_y: 0, captured_at_ms: Date.now() };
      },
      dom: {
        currentUrl: async () => 'http://fixture.test/',
        evaluate: async (expression: string) => {
          const state = expression.includes('innerText');
          log.push(state ? `state read (${clicks} clicks)` : 'title read');
          return [state ? `${clicks} clicks` : null, 'fixture'];
        },
      },
    } as unknown as Partial<Plane>;
    const { rec, recorded } = recording();
    const { w, st } = walker(
      store,
      async (ctx) => {
        log.push(`act ${ctx.path}`);
        clicks++;
        return { success: true };
      },
      { plane, rec, checks: { stateChange: true } },
    );
    await w.walk(steps(3), 'steps');
    await w.settled();
    for (const k of [1, 2]) {
      const asked = log.indexOf(`shot ${k} asked`);
      const taken = log.indexOf(`shot ${k} taken`);
      const before = log.indexOf(`state read (${k} clicks)`, asked);
      expect(before, `step ${k}'s state read ran while the post of step ${k - 1} was being taken: ${log.join(', ')}`).to.be.within(asked, taken);
      expect(log.indexOf(`act steps[${k}]`), `step ${k} acts after that post was taken`).to.be.greaterThan(taken);
    }
    // each post is asked for after its step's last look, so it shows what the checks judged
    expect(recorded.map((r) => r.post)).to.deep.equal(['shot 1 of 1 clicks', 'shot 2 of 2 clicks', 'shot 3 of 3 clicks']);
    expect(st.steps.map((e) => [e.success, e.final_url, e.page_title])).to.deep.equal([
      [true, 'http://fixture.test/', 'fixture'],
      [true, 'http://fixture.test/', 'fixture'],
      [true, 'http://fixture.test/', 'fixture'],
    ]);
  });
});
