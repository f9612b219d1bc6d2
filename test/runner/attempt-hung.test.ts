// An attempt's reads of the page around its handler (the state before the
// action, the look after it, the re-looks of an unchanged page) end with the
// run: a cancel, the run's time cap or the plane's loss is not held up by an
// agent that stopped answering (its calls would only fail at their own
// deadline, 30 s). A fake plane whose reads hang from a chosen moment.
import { expect } from 'chai';
import type { Plane, StepContext, StepHandler } from '../../gateway/plugins/contract.ts';
import { attemptStep, type Attempt } from '../../gateway/runner/attempt.ts';
import { Halt } from '../../gateway/runner/outcome.ts';

const never = new Promise<never>(() => undefined);

/** A dom plane whose evaluate and currentUrl answer until `hang` is set, then never. */
function hangingPlane(): { plane: Plane; hang(): void; clicks: number } {
  let hung = false;
  const out = { plane: undefined as unknown as Plane, hang: () => void (hung = true), clicks: 0 };
  const answer = <T>(v: T): Promise<T> => (hung ? never : Promise.resolve(v));
  out.plane = {
    capabilities: { dom: true } as unknown as Plane['capabilities'],
    screenshot: () => (hung ? never : Promise.resolve({ image: Buffer.alloc(0) } as never)),
    act: async () => ({}),
    dom: {
      currentUrl: () => answer('https://example.test/'),
      evaluate: <T>() => answer(['key', 'title'] as unknown as T),
      pageLoad: () => never,
      tabs: () => never,
      openInNew: () => never,
      closeTab: () => never,
      activateTab: () => never,
      peek: () => never,
      safeBack: () => never,
    },
  };
  return out;
}

function attempt(plane: Plane, signal: AbortSignal, run: StepHandler['run'], checks: StepHandler['checks'] = { stateChange: true, successContract: true }): Attempt {
  const handler = { types: ['click'], description: 'test', checks, run } as StepHandler;
  return { handler, step: { type: 'click' } as Attempt['step'], path: '0', plane, signal, stepTimeoutMs: 30_000, brain: undefined, context: (s) => ({ signal: s }) as unknown as StepContext };
}

describe('runner: an attempt on a plane that stops answering', () => {
  it('ends with the run when the look after the action hangs', async () => {
    const p = hangingPlane();
    const run = new AbortController();
    const cancelled = new Halt('cancelled', 'run cancelled');
    const t0 = Date.now();
    const ended = attemptStep(attempt(p.plane, run.signal, async () => {
      p.clicks++;
      p.hang();
      return { success: true };
    })).then(() => 'resolved', (err: unknown) => err);
    setTimeout(() => run.abort(cancelled), 100);
    expect(await ended).to.equal(cancelled);
    expect(Date.now() - t0).to.be.below(2000);
    expect(p.clicks).to.equal(1);
  });

  it('ends with the run when the state read before the action hangs, and never acts', async () => {
    const p = hangingPlane();
    p.hang();
    const run = new AbortController();
    const lost = new Halt('plane_lost', 'the plane agent went away');
    const ended = attemptStep(attempt(p.plane, run.signal, async () => {
      p.clicks++;
      return { success: true };
    })).then(() => 'resolved', (err: unknown) => err);
    setTimeout(() => run.abort(lost), 100);
    expect(await ended).to.equal(lost);
    expect(p.clicks).to.equal(0);
  });

  it('ends with the run during the looks at a page that seems unchanged', async () => {
    const p = hangingPlane();
    const run = new AbortController();
    const cap = new Halt('halt_timeout', 'run time cap');
    let looks = 0;
    const evaluate = p.plane.dom!.evaluate.bind(p.plane.dom);
    // the first re-look of the unchanged page hangs
    (p.plane.dom as { evaluate: typeof evaluate }).evaluate = <T>(e: string) => (++looks >= 3 ? (never as Promise<T>) : evaluate<T>(e));
    const ended = attemptStep(attempt(p.plane, run.signal, async () => ({ success: true }))).then(() => 'resolved', (err: unknown) => err);
    setTimeout(() => run.abort(cap), 800);
    expect(await ended).to.equal(cap);
    expect(looks).to.equal(3);
  });

  it('a plane that answers still gets its checks: an unchanged page is no_state_change', async () => {
    const p = hangingPlane();
    const r = await attemptStep(attempt(p.plane, new AbortController().signal, async () => ({ success: true })));
    expect(r.result).to.include({ success: false, failure_class: 'no_state_change' });
    expect(r.end?.url).to.equal('https://example.test/');
  });
});
