// The step-level failure taxonomy and how it maps to run-level halt classes and
// errors, plus the retry policy per failure class.
import type { FailureClass, Step } from '../plugins/contract.ts';
import type { Extract } from '../../schemas/types.gen.ts';

/** Extra attempts after the first, per failure class. http_4xx is never retried. */
export const RETRIES: Record<FailureClass, number> = {
  cf_challenge: 1,
  http_4xx: 0,
  http_5xx: 2,
  nav_timeout: 1,
  selector_miss: 1,
  no_state_change: 1,
  brain_loop_exhausted: 0,
  wrong_target: 0,
  submit_failed: 1,
  extractor_error: 1,
  budget_exceeded: 0,
  unknown: 1,
};

/** Backoff before retry n (1-based), in ms. */
export const backoffMs = (n: number) => Math.min(250 * 2 ** (n - 1), 4000);

/** The halt class of a run whose required step failed with this class (the handler's declared haltClass after the universal ones). */
export function haltClassFor(declared: string | undefined, fc: FailureClass | undefined): string {
  if (fc === 'cf_challenge') return 'cf_challenge';
  if (fc === 'budget_exceeded') return 'budget_cap';
  if (declared) return declared;
  if (fc === 'extractor_error') return 'extract_data_failed';
  if (fc === 'wrong_target') return 'navigation_drift';
  return 'required_step_failed';
}

/** Failure class of the entry of a step that a halt interrupted (of type `stepType`). */
export function failureClassOfHalt(haltClass: string, stepType?: string): FailureClass {
  switch (haltClass) {
    case 'budget_cap':
    case 'time_cap':
      return 'budget_exceeded';
    case 'cf_challenge':
      return 'cf_challenge';
    case 'no_schema_configured':
    case 'extract_data_failed':
      return 'extractor_error';
    case 'halt_timeout':
      // the step's own time budget (SERVICE_STEP_TIMEOUT_SECONDS): a navigate that never loaded is a nav_timeout
      return stepType === 'navigate' ? 'nav_timeout' : 'budget_exceeded';
    default:
      return 'unknown';
  }
}

/** The run-level `error` value of the spec for a halt class, when one applies. */
export function runErrorFor(haltClass: string): string | null {
  switch (haltClass) {
    case 'budget_cap':
      return 'max_cost_exceeded';
    case 'time_cap':
    case 'halt_timeout':
    case 'human_timeout':
      return 'timeout';
    case 'gate_failed':
      return 'gate_failed';
    case 'extract_data_failed':
    case 'no_schema_configured':
      return 'extract_failed';
    case 'cf_challenge':
    case 'page_blocked':
      return 'page_blocked';
    case 'navigate_failed':
    case 'bad_url':
      return 'navigation_blocked';
    default:
      return null;
  }
}

/** What stops a run: a halt class of the taxonomy, a message, and the run-level error it maps to. */
export class Halt extends Error {
  constructor(
    readonly haltClass: string,
    message: string,
    readonly error: string | null = runErrorFor(haltClass),
    /** what this run met, the first likely cause of its failure_help (a person's note on Fail) */
    readonly helpCause?: string,
  ) {
    super(message);
    this.name = 'Halt';
  }
}

/** The halt of a runner whose fenced save was refused: the run ended elsewhere or its lease is gone. */
export const runnerLost = (): Halt => new Halt('runner_lost', 'this runner no longer holds the run (its lease was taken or it ended elsewhere); it stops before acting again');

/** A step failure that the run's upstream proxy caused (the egress guard names it by Chromium's proxy errors). */
export const proxyFailure = (data: string): boolean => /net::ERR_(PROXY_[A-Z_]+|TUNNEL_CONNECTION_FAILED)\b/.test(data);

/** `_recipe` resolved into the step's extract block (tenant recipe first, then shipped); a missing one halts the run. */
export async function withRecipe(step: Step, recipe: (name: string) => Promise<Record<string, unknown>>): Promise<Step> {
  if (!step._recipe) return step;
  const schema = await recipe(step._recipe).catch(() => {
    throw new Halt('no_schema_configured', `recipe '${step._recipe}' not found`);
  });
  return { ...step, extract: { ...(schema as Extract), ...(step.extract ?? {}) } };
}
