// Gates judged by the hosted model: after a gate step's handler succeeds, the
// hosted model (brain hosted-api, with the tenant's key) reads the screen and
// says whether the step's `verify` holds. A false verdict fails the step (and
// the runner halts with gate_failed); without a hosted-api brain the handler's
// own success decides, as before.
import { isBrainError, type Brain, type StepContext, type StepResult } from '../plugins/contract.ts';

export const GATE_PROMPT = (verify: string) => `Look at the screenshot. Does this hold: ${JSON.stringify(verify)}?\nAnswer with JSON only: {"holds": true or false, "reason": "..."}`;

/** The verdict of an answer: {"holds": bool}, else a leading yes/no/true/false; undefined when there is none. */
export function verdictOf(text: string): boolean | undefined {
  const m = /"holds"\s*:\s*(true|false)/i.exec(text) ?? /^\s*(yes|no|true|false)\b/i.exec(text);
  if (!m) return undefined;
  return ['true', 'yes'].includes(m[1]!.toLowerCase());
}

/** Judges a gate's verify; undefined when no hosted model can judge (the handler's result stands). */
export async function judgeGate(ctx: StepContext, brain: Brain | undefined, verify: string): Promise<StepResult | undefined> {
  if (!brain?.ask) return undefined;
  const shot = await ctx.plane.screenshot();
  let text: string;
  try {
    const a = await brain.ask([{ screenshot: shot }], GATE_PROMPT(verify), ctx.signal);
    ctx.addCost(a.usage.cost_usd, a.usage);
    text = a.text;
  } catch (err) {
    if (!isBrainError(err)) throw err;
    if (err.code === 'malformed') return { success: false, failure_class: 'unknown', data: `gate: ${err.message}` };
    return { success: false, failure_class: 'unknown', data: `gate: ${err.message}`, halt: { halt_class: 'model_provider_unreachable' } };
  }
  const holds = verdictOf(text);
  const last_action = { type: 'VERIFY', params: { verify }, reasoning: text.slice(0, 1000) };
  if (holds === true) return { success: true, data: `verify holds (${brain.id})`, last_action };
  return { success: false, failure_class: 'unknown', data: holds === false ? `verify does not hold (${brain.id}): ${text.slice(0, 300)}` : `${brain.id} gave no verdict on verify`, last_action, retryable: false };
}
