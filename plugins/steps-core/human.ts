// request_human (issue 42): the run asks a person to act on the page (a second
// factor only they have, a consent wall, "is this the right account?") and waits
// for them through the host's askHuman. Done: the step succeeds and the run goes on
// at its next step. Fail, an expiry or a cancel halt the run in askHuman itself.
import type { StepHandler } from '../../gateway/plugins/contract.ts';
import { params, str } from './targeting.ts';

export const requestHuman: StepHandler = {
  types: ['request_human'],
  description: 'ask a person to act on the page (params.message, default the intent; params.timeout_seconds): the run waits in phase awaiting_human with a one-time takeover link, and goes on when the person presses Done',
  async run(ctx) {
    const p = params(ctx.step);
    const message = str(p.message) ?? ctx.step.intent;
    const last = { type: 'ASK_HUMAN', params: { message: message.slice(0, 300) }, reasoning: 'plan request_human step' };
    if (!ctx.askHuman) return { success: false, failure_class: 'unknown', data: 'this gateway cannot ask a person (it has no takeover service)', last_action: last, retryable: false };
    const t = p.timeout_seconds;
    if (t !== undefined && (typeof t !== 'number' || !Number.isInteger(t) || t < 1)) {
      return { success: false, failure_class: 'unknown', data: 'params.timeout_seconds must be a whole number of seconds, at least 1', last_action: last, retryable: false };
    }
    const answer = await ctx.askHuman({ reason: 'step', message, ...(typeof t === 'number' ? { timeoutSeconds: t } : {}) });
    const note = answer.note ? `: ${JSON.stringify(answer.note.slice(0, 300))}` : '';
    return { success: true, data: `a person took over and pressed Done after ${Math.round((answer.waited_ms ?? 0) / 1000)} s${note}`, last_action: last };
  },
};
