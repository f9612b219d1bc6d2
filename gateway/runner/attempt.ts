// One attempt of a step handler, bounded by the step timeout and the run's signal,
// then checked: the gate's verify, the hints success contract, and the
// no_state_change demotion of actions that changed nothing.
import { abortable, childSignal, sleep } from '../../shared/abort.ts';
import type { Brain, Plane, Step, StepContext, StepHandler, StepResult } from '../plugins/contract.ts';
import { frameDigest, pageArea } from './fingerprint.ts';
import { judgeGate } from './gates.ts';
import { Halt } from './outcome.ts';

/** Further looks, UNCHANGED_LOOK_MS apart, before an action is judged to have changed nothing. */
const UNCHANGED_LOOKS = 3;
const UNCHANGED_LOOK_MS = 300;

const list = (v: unknown): string[] => (v === undefined || v === null ? [] : Array.isArray(v) ? v.map(String) : [String(v)]);

export interface Attempt {
  handler: StepHandler;
  step: Step;
  path: string;
  plane: Plane;
  /** the run's signal: cancel, time cap, plane lost */
  signal: AbortSignal;
  stepTimeoutMs: number;
  /** the handler's context, given the attempt's signal (the run's, plus the step timeout) */
  context(signal: AbortSignal, brain: Brain | undefined): StepContext;
  brain: Brain | undefined;
}

export async function attemptStep(a: Attempt): Promise<StepResult> {
  const { handler, step, path: p, plane } = a;
  const watchState = handler.checks?.stateChange === true;
  const before = watchState ? await stateSnapshot(plane) : undefined;
  // one listener on the run's signal per attempt, removed when the attempt ends
  const bounded = childSignal(a.signal, a.stepTimeoutMs, () => new Halt('halt_timeout', `step ${p} (${step.type}) took longer than ${a.stepTimeoutMs} ms`));
  const ctx = a.context(bounded.signal, a.brain);
  let result: StepResult;
  try {
    result = await abortable(Promise.resolve().then(() => handler.run(ctx)), bounded.signal);
  } catch (err) {
    if (a.signal.aborted) throw a.signal.reason;
    if (bounded.timedOut()) throw bounded.signal.reason;
    if (err instanceof Halt) throw err;
    return { success: false, failure_class: 'unknown', data: `handler error: ${(err as Error)?.message ?? String(err)}`.slice(0, 500) };
  } finally {
    bounded.dispose();
  }
  if (!result.success) return result;
  if (step.gate && step.verify) {
    const verdict = await judgeGate(ctx, ctx.brainFor?.('hosted-api'), step.verify);
    if (verdict && !verdict.success) return verdict;
  }
  const hints = step.hints ?? {};
  if (handler.checks?.successContract && (plane.dom || plane.facts)) {
    const url = plane.dom ? await plane.dom.currentUrl().catch(() => '') : ((await plane.facts?.().catch(() => null))?.url ?? '');
    const contains = list(hints.expect_url_contains);
    const excludes = list(hints.expect_url_excludes);
    if (contains.some((c) => !url.includes(c)) || excludes.some((x) => url.includes(x))) {
      return { ...result, success: false, failure_class: 'wrong_target', data: `post-action URL ${url} breaks the hints success contract` };
    }
    const present = list(hints.expect_text_present);
    // text is read from the DOM, or on computer_plane from a DOM snapshot the browser takes (no script in the page)
    if (present.length > 0) {
      const text = plane.dom ? await plane.dom.evaluate<string>('document.body ? document.body.innerText : ""').catch(() => '') : ((await plane.facts?.({ text: true }).catch(() => null))?.text ?? '');
      // whitespace as rendered differs between a DOM's innerText and a layout snapshot's text runs
      const flat = (x: string) => x.replace(/\s+/g, ' ').trim();
      if (present.every((t) => flat(text).includes(flat(t)))) return result;
      return { ...result, success: false, failure_class: 'submit_failed', data: 'expected text did not appear after the action' };
    }
  }
  // no_state_change applies unless the step names its own success contract (text present covers in-place submits)
  if (before !== undefined && list(hints.expect_text_present).length === 0) {
    let after = await stateSnapshot(plane);
    // what the action set off may show a moment later (a fetch's answer, a loaded host): looked at again before
    // calling it unchanged, since the retry that follows would repeat an action that worked
    for (let look = 0; after === before && look < UNCHANGED_LOOKS; look++) {
      await sleep(UNCHANGED_LOOK_MS, a.signal);
      after = await stateSnapshot(plane);
    }
    if (after === before) return { ...result, success: false, failure_class: 'no_state_change', data: 'URL, page and scroll did not change' };
  }
  return result;
}

/**
 * What "the state changed" compares. DOM-aware planes answer from the page in
 * one call (URL, scroll, a hash of the rendered text and the element count),
 * which sees what a person would and costs a few ms; other planes compare a
 * screenshot digest of the page's area when the plane says where that is
 * (computer_plane's page facts), so that the browser's own toolbar and tab strip
 * (a hover highlight, the address bar's focus, the loading indicator) are not
 * taken for the page changing.
 */
async function stateSnapshot(plane: Plane): Promise<string> {
  if (plane.dom) {
    const s = await plane.dom.evaluate<string>(PAGE_STATE_SCRIPT).catch(() => undefined);
    if (typeof s === 'string') return s;
  }
  // lossless: a JPEG's blocks straddle the page's top edge, so the toolbar's changes would leak into the page's digest
  const shot = await plane.screenshot('png').catch(() => undefined);
  const url = plane.dom ? await plane.dom.currentUrl().catch(() => '') : (shot?.page?.url ?? '');
  return `${url}|${shot ? await frameDigest(shot.image, pageArea(shot)) : ''}|${shot?.scroll_y ?? ''}`;
}

const PAGE_STATE_SCRIPT = `(() => {
  const t = document.body ? document.body.innerText : '';
  let h = 0x811c9dc5;
  for (let i = 0; i < t.length; i++) { h ^= t.charCodeAt(i); h = Math.imul(h, 0x01000193); }
  return [location.href, scrollX, scrollY, document.getElementsByTagName('*').length, t.length, (h >>> 0).toString(16)].join('|');
})()`;
