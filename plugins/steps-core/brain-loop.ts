// The brain loop: screenshot, think, act, one action per turn, until the brain
// says DONE or max_steps (legacy: budget) run out. Every turn's tokens go into
// the run's budget (ctx.addCost halts the run with budget_cap past max_cost).
// The same action on an unchanged screen three times is a loop:
// brain_loop_exhausted. An unreachable or refusing upstream halts the run with
// model_provider_unreachable; a malformed answer fails the step (classified).
import { createHash } from 'node:crypto';
import { loadSharp } from '../../shared/load-once.ts';
import { modelExtract } from './model-extract.ts';
import { refuseForbidden } from './forbidden.ts';
import { changesPage, judgeAfterAction } from './antibot.ts';
import { NAV_WAIT_MS, settle } from './settle.ts';
import { rejectionFor } from '../../shared/recipe-keys.ts';
import { hostAllowed } from '../../shared/allowed-domains.ts';
import { Learner } from './learn.ts';
import { BrainError, isBrainError, isHttpUrl, isPlaneDeadline, type Action, type Brain, type Screenshot, type StepContext, type StepHandler, type StepResult } from '../../gateway/plugins/contract.ts';

export const DEFAULT_MAX_STEPS = 15;
/** identical (screen, action) pairs tolerated before the loop detector fires */
export const REPEAT_LIMIT = 3;

const URL_LIKE = /^https?:\/\/\S+$/i;

/** The task text a brain gets for a step: its intent, then hint and verify when given. */
export function taskOf(ctx: StepContext): string {
  const s = ctx.step;
  return [s.intent, s.hint ? `Hint: ${s.hint}` : '', s.verify ? `Success looks like: ${s.verify}` : ''].filter(Boolean).join('\n');
}

/** The action the plane performs: TYPE of a bare URL goes through the URL auto-navigate path (compact-cua visit_url, web_search). */
export function environmentAction(a: Action): Action {
  if (a.type !== 'TYPE') return a;
  if (URL_LIKE.test(a.text.trim())) return { type: 'NAVIGATE', url: a.text.trim() };
  // a brain types text; only a plan's step may name a vault credential (a brain plugin's action that does types its text)
  return 'secret' in a ? { type: 'TYPE', text: a.text } : a;
}

/**
 * What "an unchanged screen" compares: a 32x18 grayscale thumbnail at 16
 * levels, so a blinking caret, the pointer or antialiasing noise on a real
 * display do not count as change, while any real page change does.
 */
async function screenKey(s: Screenshot): Promise<string> {
  const px = await (await loadSharp())(s.image).resize(32, 18, { fit: 'fill' }).grayscale().raw().toBuffer();
  return createHash('sha1').update(px.map((v) => v >> 4)).digest('hex');
}

/** What a failed model call means for the step. */
export function brainFailure(err: unknown, ctx: StepContext): StepResult | undefined {
  if (!isBrainError(err)) return undefined;
  if (err.usage) ctx.addCost(err.usage.cost_usd, err.usage);
  if (err.code === 'malformed') return { success: false, failure_class: 'unknown', data: err.message };
  if (err.code === 'budget_exceeded') return { success: false, failure_class: 'budget_exceeded', data: err.message, retryable: false };
  // the seam for the takeover requests: a person may acknowledge it there; a brain never does
  if (err.code === 'safety_check') return { success: false, failure_class: 'unknown', data: err.message, halt: { halt_class: 'safety_check_pending' }, retryable: false };
  // a URL the model made up is never sent to the browser (javascript:, file:, relative, garbage)
  if (err.code === 'bad_url') return { success: false, failure_class: 'unknown', data: err.message, halt: { halt_class: 'bad_url' }, retryable: false };
  return { success: false, failure_class: 'unknown', data: err.message, halt: { halt_class: 'model_provider_unreachable' } };
}

/** Why a NAVIGATE (a visit_url, a web_search) may not go where it asks: its host is off the tenant's list; undefined otherwise. */
function offList(ctx: StepContext, action: Action): string | undefined {
  if (action.type !== 'NAVIGATE' || !ctx.allowedDomains?.length) return undefined;
  const host = new URL(action.url).hostname.replace(/^\[|\]$/g, '');
  if (hostAllowed(host, ctx.allowedDomains)) return undefined;
  return `egress_refused: ${host} is outside the tenant's allowed_domains; open a page of an allowed host instead`;
}

export async function runBrainLoop(ctx: StepContext, brain: Brain): Promise<StepResult> {
  const maxSteps = ctx.step.max_steps ?? ctx.step.budget ?? DEFAULT_MAX_STEPS;
  const task = taskOf(ctx);
  const history: Action[] = [];
  const seen = new Map<string, number>();
  let last: StepResult['last_action'];
  let refusedLast: string | undefined;
  const learner = new Learner();
  for (let turn = 0; turn < maxSteps; turn++) {
    const shot = await ctx.plane.screenshot();
    // the brain sees the URL on every plane that knows it (computer_plane: its page facts)
    const url = ctx.plane.dom ? await ctx.plane.dom.currentUrl().catch(() => undefined) : ((await ctx.plane.facts?.().catch(() => null))?.url || undefined);
    let out;
    try {
      out = await brain.think([{ screenshot: shot, ...(url ? { url } : {}), ...(refusedLast ? { refused: refusedLast } : {}) }], task, history, { width: shot.width, height: shot.height }, ctx.signal, ctx.brainMayAskHuman && ctx.askHuman ? { mayAskHuman: true } : undefined);
    } catch (err) {
      const failed = brainFailure(err, ctx);
      if (failed) return { ...failed, ...(last ? { last_action: last } : {}) };
      throw err;
    }
    ctx.addCost(out.usage.cost_usd, out.usage);
    // the screenshot itself is the step's observation in the trace
    ctx.recordModelIo?.('planner', { model: brain.id, task, action_history: history, screen_size: { width: shot.width, height: shot.height }, ...(url ? { url } : {}) }, { text: out.reasoning, tool_calls: [out.action], usage: out.usage });
    const { type, ...params } = out.action;
    last = { type, params, reasoning: out.reasoning.slice(0, 2000) };
    ctx.log(`${brain.id} turn ${turn + 1}: ${type} ${JSON.stringify(params)}`);
    if (out.action.type === 'DONE') {
      return out.action.success
        ? { success: true, data: `${brain.id} done after ${history.length} action(s)`, last_action: last, learned: await learner.finish(ctx, url) }
        : { success: false, failure_class: 'brain_loop_exhausted', data: `${brain.id} gave up: ${out.reasoning.slice(0, 300)}`, last_action: last, retryable: false };
    }
    if (out.action.type === 'ASK_HUMAN') {
      // only a run that allows it (runtime.brain_may_ask_human) hands the page to a person; otherwise as an unknown action
      if (!ctx.brainMayAskHuman || !ctx.askHuman) return { ...brainFailure(new BrainError('malformed', 'malformed model answer: unknown action "ASK_HUMAN"'), ctx)!, last_action: last };
      await ctx.askHuman({ reason: 'brain', message: out.action.message });
      learner.taint('a person acted on the page during the step');
      history.push(out.action);
      continue;
    }
    const key = `${await screenKey(shot)}|${JSON.stringify(out.action)}`;
    const n = (seen.get(key) ?? 0) + 1;
    seen.set(key, n);
    if (n >= REPEAT_LIMIT) return { success: false, failure_class: 'brain_loop_exhausted', data: `loop detected: ${type} repeated ${n} times on an unchanged screen`, last_action: last };
    const action = environmentAction(out.action);
    // a brain plugin that does not check its URLs is checked here
    if (action.type === 'NAVIGATE' && !isHttpUrl(action.url)) return { ...brainFailure(new BrainError('bad_url', `${brain.id} asked to open ${JSON.stringify(action.url.slice(0, 200))}, which is not an http(s) URL`), ctx)!, last_action: last };
    // an action whose reasoning the recipe's rejection_intents recognise is answered with their rejection
    const rejected = rejectionFor(ctx.step, out.reasoning);
    if (rejected) return { success: false, failure_class: 'unknown', data: `rejected_intent ${JSON.stringify(rejected.phrase)}: ${rejected.message}`, halt: { halt_class: rejected.halt_class }, last_action: last };
    // a forbidden control is refused before the plane acts
    const refused = await refuseForbidden(ctx, action);
    if (refused) return { ...refused, last_action: last };
    refusedLast = offList(ctx, action);
    if (refusedLast) {
      // the guard would refuse it too; told here, the brain can pick an allowed page instead
      // (one that keeps asking is stopped by the loop detector above: same screen, same action)
      ctx.log(`${type} refused before acting: ${refusedLast}`);
      history.push(out.action);
      continue;
    }
    let done;
    const learned = await learner.look(ctx, action, url, shot);
    try {
      done = await ctx.plane.act(action);
    } catch (err) {
      if (ctx.signal.aborted || isPlaneDeadline(err)) throw err;
      return { success: false, failure_class: 'unknown', data: `the plane refused ${type}: ${(err as Error).message}`.slice(0, 500), last_action: last };
    }
    history.push(out.action);
    learner.keep(learned);
    if (changesPage(action)) {
      // a challenge or a block the action reached ends the step as it ends a navigate
      if (!ctx.plane.dom && !done.settled && action.type !== 'NAVIGATE') await settle(ctx.plane, ctx.signal, NAV_WAIT_MS);
      const judged = await judgeAfterAction(ctx, { success: true, last_action: last });
      if (!judged.success) return judged;
    }
  }
  return { success: false, failure_class: 'brain_loop_exhausted', data: `no DONE within ${maxSteps} actions`, ...(last ? { last_action: last } : {}) };
}

/**
 * Grounding: a brain finds, on the screenshot, the target a mechanical locator
 * missed. Used when the step asks for it (`grounding: true`: the hosted model,
 * else the run's brain), the plane has no DOM, or a target_role the recipe's
 * role map does not resolve (the run's brain). Undefined
 * when grounding does not apply or no brain is there.
 */
export async function ground(ctx: StepContext, unresolvedRole = false): Promise<{ point: { x: number; y: number }; how: string } | { miss: string } | undefined> {
  if (!ctx.step.grounding && !unresolvedRole && ctx.plane.dom) return undefined;
  const brain = ctx.step.grounding ? (ctx.brainFor?.('hosted-api') ?? ctx.brainFor?.()) : ctx.brainFor?.();
  if (!brain) return undefined;
  const shot = await ctx.plane.screenshot();
  let out;
  try {
    out = await brain.think([{ screenshot: shot }], `Click the target of this step, nothing else: ${taskOf(ctx)}`, [], { width: shot.width, height: shot.height }, ctx.signal);
  } catch (err) {
    if (isBrainError(err)) return { miss: `grounding by ${brain.id} failed: ${err.message}` };
    throw err;
  }
  ctx.addCost(out.usage.cost_usd, out.usage);
  ctx.recordModelIo?.('grounding', { model: brain.id, task: taskOf(ctx), screen_size: { width: shot.width, height: shot.height } }, { text: out.reasoning, tool_calls: [out.action], usage: out.usage });
  const a = out.action;
  if (a.type === 'CLICK' || a.type === 'DOUBLE_CLICK' || a.type === 'RIGHT_CLICK' || a.type === 'TRIPLE_CLICK' || a.type === 'MIDDLE_CLICK') return { point: { x: a.x, y: a.y }, how: `grounding by ${brain.id}` };
  return { miss: `grounding by ${brain.id} answered ${a.type}, not a point` };
}

/** default-cua and the generic handler: the run's brain drives the step. */
export const brainStep: StepHandler = {
  types: ['default-cua', '*'],
  description: "the run's brain carries out step.intent (with hint), one action per turn, up to max_steps (legacy budget); also serves unknown step types",
  needs: { brain: true },
  run: (ctx) => runBrainLoop(ctx, ctx.brain!),
};

/** hosted-api: the hosted model (with the tenant's key) drives the step. */
export const hostedStep: StepHandler = {
  types: ['hosted-api'],
  description: 'the hosted model (brain hosted-api, with the tenant key) carries out step.intent, one action per turn; with an extract block it reads the rows instead',
  checks: { rows: true },
  async run(ctx) {
    const brain = ctx.brainFor?.('hosted-api');
    if (!brain) return { success: false, failure_class: 'unknown', data: "brain 'hosted-api' is not configured on this deployment", retryable: false };
    if (ctx.step.extract) return (await modelExtract({ ...ctx, brain, step: { ...ctx.step, hosted_only: true } }, ctx.step.extract)) ?? { success: false, failure_class: 'extractor_error', data: "brain 'hosted-api' cannot read a screen in text" };
    return runBrainLoop(ctx, brain);
  },
};
