// A step's `verify`, judged after its handler succeeds: a brain reads the
// screen and says whether the expected outcome holds. The judge is the hosted
// model (brain hosted-api, with the tenant's key) when the deployment has one,
// else the run's own brain (its cua_model); the submission refuses a plan with
// `verify` when neither can read a screen (verifierId), so a verify is never
// stored and ignored. A false verdict fails the step; on a gate the runner then
// halts with gate_failed.
import { isBrainError, type Brain, type StepContext, type StepResult } from '../plugins/contract.ts';

export const GATE_PROMPT = (verify: string) => `Look at the screenshot. Does this hold: ${JSON.stringify(verify)}?\nAnswer with JSON only: {"holds": true or false, "reason": "..."}`;

/** The id of the brain that judges a step's verify: hosted-api when it can read a screen, else (unless the step is hosted_only) the run's brain when it can; undefined when none can. */
export function verifierId(runBrain: string, hostedOnly: boolean, canAsk: (id: string) => boolean): string | undefined {
  return (hostedOnly ? ['hosted-api'] : ['hosted-api', runBrain]).find(canAsk);
}

/** The verdict of an answer: {"holds": bool}, else a leading yes/no/true/false; undefined when there is none. */
export function verdictOf(text: string): boolean | undefined {
  const m = /"holds"\s*:\s*(true|false)/i.exec(text) ?? /^\s*(yes|no|true|false)\b/i.exec(text);
  if (!m) return undefined;
  return ['true', 'yes'].includes(m[1]!.toLowerCase());
}

/** The brain that judges verify for a step: the same choice as verifierId, from the step's context. */
function verifierFor(ctx: StepContext): Brain | undefined {
  const hosted = ctx.brainFor?.('hosted-api');
  if (hosted?.ask || ctx.step.hosted_only === true) return hosted?.ask ? hosted : undefined;
  const own = ctx.brainFor?.();
  return own?.ask ? own : undefined;
}

/** Judges a step's verify; a step whose verify nobody here can judge fails (the submission refuses such plans). */
export async function judgeVerify(ctx: StepContext, verify: string): Promise<StepResult> {
  const brain = verifierFor(ctx);
  // only a run accepted before the deployment's brains changed gets here
  if (!brain?.ask) return { success: false, failure_class: 'unknown', data: "verify: no brain on this deployment can judge it (hosted-api does not, and the run's brain does not or the step is hosted_only)", retryable: false };
  const shot = await ctx.plane.screenshot();
  let text: string;
  try {
    const a = await brain.ask([{ screenshot: shot }], GATE_PROMPT(verify), ctx.signal);
    ctx.addCost(a.usage.cost_usd, a.usage);
    text = a.text;
  } catch (err) {
    if (!isBrainError(err)) throw err;
    if (err.code === 'malformed') return { success: false, failure_class: 'unknown', data: `verify: ${err.message}` };
    return { success: false, failure_class: 'unknown', data: `verify: ${err.message}`, halt: { halt_class: 'model_provider_unreachable' } };
  }
  const holds = verdictOf(text);
  const last_action = { type: 'VERIFY', params: { verify }, reasoning: text.slice(0, 1000) };
  if (holds === true) return { success: true, data: `verify holds (${brain.id})`, last_action };
  return { success: false, failure_class: 'unknown', data: holds === false ? `verify does not hold (${brain.id}): ${text.slice(0, 300)}` : `${brain.id} gave no verdict on verify`, last_action, retryable: false };
}
