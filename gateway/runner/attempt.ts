// One attempt of a step handler, bounded by the step timeout and the run's signal,
// then checked: the hints success contract, the no_state_change demotion of
// actions that changed nothing, and last (on a step that passed the others) its
// verify, judged by a brain.
import { abortable, childSignal, sleep } from '../../shared/abort.ts';
import { isPlaneDeadline, type Brain, type Plane, type Step, type StepContext, type StepHandler, type StepResult } from '../plugins/contract.ts';
import { frameDigest, pageArea } from './fingerprint.ts';
import { judgeVerify } from './gates.ts';
import { Halt } from './outcome.ts';

/** Further looks, UNCHANGED_LOOK_MS apart, before an action is judged to have changed nothing. */
const UNCHANGED_LOOKS = 3;
const UNCHANGED_LOOK_MS = 300;

const list = (v: unknown): string[] => (v === undefined || v === null ? [] : Array.isArray(v) ? v.map(String) : [String(v)]);

export interface Attempt {
  handler: StepHandler;
  /** take the post screenshot once the attempt's checks have looked (the run records screenshots) */
  wantsShot?: boolean;
  /** what must be done before the handler acts (the previous step's post screenshot); awaited beside the state read before the action */
  ready?: Promise<unknown>;
  step: Step;
  path: string;
  plane: Plane;
  /** the run's signal: cancel, time cap, plane lost */
  signal: AbortSignal;
  stepTimeoutMs: number;
  /** the run's clock: the step's time limit stops with it while a person has the page */
  clock?: { timer(ms: number, fire: () => void): { clear(): void } };
  /** the handler's context, given the attempt's signal (the run's, plus the step timeout) */
  context(signal: AbortSignal, brain: Brain | undefined): StepContext;
  brain: Brain | undefined;
}

/** The page as an attempt left it, read once for its checks and its step's entry. */
export interface PageEnd {
  url: string;
  title: string;
  /** the post screenshot, started after the attempt's last look at the page */
  shot?: Promise<Buffer | undefined>;
}

export interface Attempted {
  result: StepResult;
  /** how the attempt left the page; absent when the handler itself failed or threw */
  end?: PageEnd;
}

/** One look at the page: its URL and title, and its state when a check compares it. */
interface Look {
  url: string;
  title: string;
  state?: string;
}

export async function attemptStep(a: Attempt): Promise<Attempted> {
  const { handler, step, path: p, plane } = a;
  const watchState = handler.checks?.stateChange === true;
  // the reads around the handler end with the run (cancel, time cap, plane lost), not only with the plane call's own deadline (30 s on a hung agent)
  const held = <T>(x: Promise<T>): Promise<T> => abortable(x, a.signal);
  const [before] = await held(Promise.all([watchState ? stateKey(plane) : undefined, a.ready?.catch(() => undefined)]));
  // one listener on the run's signal per attempt, removed when the attempt ends
  const bounded = childSignal(a.signal, a.stepTimeoutMs, () => new Halt('halt_timeout', `step ${p} (${step.type}) took longer than ${a.stepTimeoutMs} ms`), a.clock && ((ms, fire) => a.clock!.timer(ms, fire)));
  const ctx = a.context(bounded.signal, a.brain);
  let result: StepResult;
  try {
    result = await abortable(Promise.resolve().then(() => handler.run(ctx)), bounded.signal);
  } catch (err) {
    if (a.signal.aborted) throw a.signal.reason;
    if (bounded.timedOut()) throw bounded.signal.reason;
    if (err instanceof Halt) throw err;
    // the page or its agent stopped answering: the action may have happened, so it is not repeated
    if (isPlaneDeadline(err)) return { result: { success: false, failure_class: 'nav_timeout', data: `the plane did not answer in time: ${(err as Error).message}`.slice(0, 500), retryable: false } };
    return { result: { success: false, failure_class: 'unknown', data: `handler error: ${(err as Error)?.message ?? String(err)}`.slice(0, 500) } };
  } finally {
    bounded.dispose();
  }
  if (!result.success) return { result };
  const checked = await checkPage(a, result, before, held);
  if (!checked.result.success || !step.verify) return checked;
  // a verify is judged last, on a step that passed every other check: a model call is never spent on a step that fails anyway
  const verdict = await held(judgeVerify(ctx, step.verify));
  return verdict.success ? checked : { result: verdict, ...(checked.end ? { end: checked.end } : {}) };
}

/** The checks of a handler's success against the page it left: the hints success contract and no_state_change. */
async function checkPage(a: Attempt, result: StepResult, before: string | undefined, held: <T>(x: Promise<T>) => Promise<T>): Promise<Attempted> {
  const { step, plane, handler } = a;
  // the post screenshot is started after the last look, so it is never older than what the checks judged
  const end = (l: Look): PageEnd => ({ url: l.url, title: l.title, ...(a.wantsShot ? { shot: plane.screenshot().then((s) => s.image, () => undefined) } : {}) });
  let after = await held(look(plane, before !== undefined));
  const hints = step.hints ?? {};
  if (handler.checks?.successContract && (plane.dom || plane.facts)) {
    const contains = list(hints.expect_url_contains);
    const excludes = list(hints.expect_url_excludes);
    if (contains.some((c) => !after.url.includes(c)) || excludes.some((x) => after.url.includes(x))) {
      return { result: { ...result, success: false, failure_class: 'wrong_target', data: `post-action URL ${after.url} breaks the hints success contract` }, end: end(after) };
    }
    const present = list(hints.expect_text_present);
    // text is read from the DOM, or on computer_plane from a DOM snapshot the browser takes (no script in the page)
    if (present.length > 0) {
      const text = await held(plane.dom ? plane.dom.evaluate<string>('document.body ? document.body.innerText : ""').catch(() => '') : plane.facts ? plane.facts({ text: true }).then((f) => f?.text ?? '', () => '') : Promise.resolve(''));
      // whitespace as rendered differs between a DOM's innerText and a layout snapshot's text runs
      const flat = (x: string) => x.replace(/\s+/g, ' ').trim();
      if (present.every((t) => flat(text).includes(flat(t)))) return { result, end: end(after) };
      return { result: { ...result, success: false, failure_class: 'submit_failed', data: 'expected text did not appear after the action' }, end: end(after) };
    }
  }
  // no_state_change applies unless the step names its own success contract (text present covers in-place submits)
  if (before !== undefined && list(hints.expect_text_present).length === 0) {
    // what the action set off may show a moment later (a fetch's answer, a loaded host): looked at again before
    // calling it unchanged, since the retry that follows would repeat an action that worked
    for (let n = 0; after.state === before && n < UNCHANGED_LOOKS; n++) {
      await sleep(UNCHANGED_LOOK_MS, a.signal);
      after = await held(look(plane, true));
    }
    if (after.state === before) return { result: { ...result, success: false, failure_class: 'no_state_change', data: 'URL, page and scroll did not change' }, end: end(after) };
  }
  return { result, end: end(after) };
}

/** The state key alone (before an action). */
async function stateKey(plane: Plane): Promise<string> {
  const seen = plane.dom ? await plane.dom.evaluate<[string, string] | null>(PAGE_STATE_SCRIPT).catch(() => null) : null;
  if (Array.isArray(seen) && typeof seen[0] === 'string') return seen[0];
  return screenshotState(plane, plane.dom ? await plane.dom.currentUrl().catch(() => '') : undefined);
}

/** The URL, the title and (`state`) the state key, read side by side; never rejects (what cannot be read is empty). */
export async function look(plane: Plane, state: boolean): Promise<Look> {
  const dom = plane.dom;
  if (dom) {
    const [url, seen] = await Promise.all([dom.currentUrl().catch(() => ''), dom.evaluate<[string, string] | null>(state ? PAGE_STATE_SCRIPT : TITLE_SCRIPT).catch(() => null)]);
    const title = Array.isArray(seen) && typeof seen[1] === 'string' ? seen[1] : '';
    const key = Array.isArray(seen) && typeof seen[0] === 'string' ? seen[0] : undefined;
    return { url, title, ...(state ? { state: key ?? (await screenshotState(plane, url)) } : {}) };
  }
  const [facts, key] = await Promise.all([plane.facts?.().catch(() => null) ?? null, state ? screenshotState(plane) : undefined]);
  return { url: facts?.url ?? '', title: facts?.title ?? '', ...(key !== undefined ? { state: key } : {}) };
}

/**
 * What "the state changed" compares. DOM-aware planes answer from the page in
 * one call (URL, scroll, a hash of the rendered text and the element count),
 * which sees what a person would and costs a few ms; other planes compare a
 * screenshot digest of the page's area when the plane says where that is
 * (computer_plane's page facts), so that the browser's own toolbar and tab strip
 * (a hover highlight, the address bar's focus, the loading indicator) are not
 * taken for the page changing. This is the second kind (and the first's fallback).
 */
async function screenshotState(plane: Plane, domUrl?: string): Promise<string> {
  // lossless: a JPEG's blocks straddle the page's top edge, so the toolbar's changes would leak into the page's digest
  const shot = await plane.screenshot('png').catch(() => undefined);
  const url = domUrl ?? shot?.page?.url ?? '';
  return `${url}|${shot ? await frameDigest(shot.image, pageArea(shot)) : ''}|${shot?.scroll_y ?? ''}`;
}

/** [state key, title]: the key compares URL, scroll, element count and a hash of the rendered text */
const PAGE_STATE_SCRIPT = `(() => {
  const t = document.body ? document.body.innerText : '';
  let h = 0x811c9dc5;
  for (let i = 0; i < t.length; i++) { h ^= t.charCodeAt(i); h = Math.imul(h, 0x01000193); }
  return [[location.href, scrollX, scrollY, document.getElementsByTagName('*').length, t.length, (h >>> 0).toString(16)].join('|'), document.title];
})()`;
const TITLE_SCRIPT = '[null, document.title]';
