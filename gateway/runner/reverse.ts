// Agentic recovery with a step's `reverse`: a brain step that failed after it
// had acted on the page is undone, by the same brain carrying out the step's
// `reverse` description, before it is retried, so the retry starts from the
// page the step began on instead of repeating an action on top of its own
// half-done work. Mechanical steps never act through a brain and are retried
// as they are. A reverse that fails stops the retries: what the page holds is
// then unknown, and a retry could do the action twice.
import type { StepResult } from '../plugins/contract.ts';
import { attemptStep, type Attempt } from './attempt.ts';

/** True when the attempt calls for its step's reverse before a retry. */
export function wantsReverse(a: Pick<Attempt, 'handler' | 'step'>, failed: StepResult): boolean {
  const acted = failed.last_action !== undefined && failed.last_action.type !== 'DONE';
  return a.handler.needs?.brain === true && typeof a.step.reverse === 'string' && a.step.reverse.trim() !== '' && acted;
}

/** Runs the reverse as one attempt of the same handler whose intent is the step's `reverse`. */
export async function runReverse(a: Attempt): Promise<StepResult> {
  const { reverse, verify: _v, gate: _g, hints: _h, ...rest } = a.step;
  const undo = { ...rest, intent: String(reverse) };
  const { result } = await attemptStep({ ...a, step: undo, path: `${a.path} (reverse)`, wantsShot: false, context: (signal, brain) => ({ ...a.context(signal, brain), step: undo }) });
  return result;
}
