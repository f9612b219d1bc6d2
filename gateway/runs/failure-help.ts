// failure_help for a halted run: what happened, why it usually happens, what to
// do next, and where to look. Unknown classes get the default entry, which
// still lists the debug surfaces.
import type { FailureHelp } from './records.ts';

interface Entry {
  summary: string;
  likely_causes: string[];
  next_steps: string[];
}

const CATALOGUE: Record<string, Entry> = {
  cancelled: {
    summary: 'The run was cancelled before it finished.',
    likely_causes: ['a caller cancelled it with POST /v1/runs/{run_id}/cancel'],
    next_steps: ['submit the plan again if the run is still wanted'],
  },
  budget_cap: {
    summary: "The run's cost reached max_cost (the smaller of the request's and the tenant's cap).",
    likely_causes: ['brain-driven steps used more model tokens than planned', 'a loop ran more iterations than expected'],
    next_steps: ['raise max_cost within the tenant cap', 'replace brain steps with mechanical ones (selectors) where the page allows'],
  },
  time_cap: {
    summary: "The run reached max_time_minutes (the smaller of the request's and the tenant's cap).",
    likely_causes: ['slow pages or long waits', 'a loop ran more iterations than expected'],
    next_steps: ['raise max_time_minutes within the tenant cap', 'lower loop_count or wait seconds'],
  },
  loop_stuck: {
    summary: 'Consecutive loop iterations showed the same page (URL, screenshot and visible text): the loop made no progress.',
    likely_causes: ['pagination reached its last page', 'the paginate or click step missed its target'],
    next_steps: ['check the paginate step target on the last screenshot', 'raise state_repeat_threshold if repeats are expected'],
  },
  off_source_drift: {
    summary: 'The run stayed outside pinned_source_url_pattern for more steps than off_source_step_budget allows.',
    likely_causes: ['a click opened an unrelated site or an ad', 'the site redirected to another origin'],
    next_steps: ['tighten the click target (params.selector)', 'widen pinned_source_url_pattern if the other origin is legitimate'],
  },
  navigate_failed: {
    summary: 'A required navigation failed after its retries.',
    likely_causes: ['the target answered 4xx or 5xx', 'the page did not load within the navigate budget', 'the host is unreachable or refused by the egress guard'],
    next_steps: ['open the URL yourself to check it', 'read final_url and failure_class in the result steps'],
  },
  navigation_drift: {
    summary: 'The browser ended up somewhere the plan did not expect.',
    likely_causes: ['a redirect or a click on the wrong element'],
    next_steps: ['set hints.expect_url_contains on click steps', 'use params.selector for the target'],
  },
  bad_url: {
    summary: 'A URL in the plan could not be used.',
    likely_causes: ['a malformed URL or an unresolved {{template}}'],
    next_steps: ['fix the URL in the plan'],
  },
  cf_challenge: {
    summary: 'An anti-bot interstitial did not clear.',
    likely_causes: ['the site challenges automated browsers', 'the proxy exit has a poor reputation'],
    next_steps: ['run on computer_plane with stealth on', 'try another proxy provider or city'],
  },
  page_blocked: {
    summary: 'The site blocked the page.',
    likely_causes: ['rate limiting or bot detection by the site'],
    next_steps: ['slow the plan down (wait steps)', 'try another proxy provider'],
  },
  extract_data_failed: {
    summary: 'An extraction step returned no usable rows.',
    likely_causes: ['the selectors match nothing on this page', 'every row missed a required field'],
    next_steps: ['check extract.item_selector and field selectors against the last screenshot', 'mark fewer fields required'],
  },
  no_schema_configured: {
    summary: 'An extraction step has no fields and no recipe.',
    likely_causes: ['extract.fields is missing and _recipe names no recipe'],
    next_steps: ['add extract.fields or register the recipe with POST /v1/recipes'],
  },
  gate_failed: {
    summary: "A gate step's verification did not hold, so the run did not move to the next section.",
    likely_causes: ['the page was not in the expected state after the section', 'the verify text or hints do not match this site'],
    next_steps: ['read the gate step entry and its screenshot in the result', 'adjust verify or hints.expect_text_present'],
  },
  required_step_failed: {
    summary: 'A step marked required failed after its retries, which halts the pipeline.',
    likely_causes: ['see the failure_class of the failed step in the result'],
    next_steps: ['read the failed step entry (final_url, page_title, screenshot_b64)', 'make the step more specific, or not required'],
  },
  model_provider_unreachable: {
    summary: 'The brain or hosted model upstream could not be reached.',
    likely_causes: ['the model server is down or overloaded'],
    next_steps: ['retry with exponential backoff (5 s, 30 s, 2 min)'],
  },
  plane_unavailable: {
    summary: 'No compute plane could be started or reached for this run.',
    likely_causes: ['the plane agent is down or misconfigured (SERVICE_PLANES)', 'the browser failed to launch'],
    next_steps: ['check GET /v1/health and the gateway logs', 'retry the run'],
  },
  plane_lost: {
    summary: 'The compute plane went away in the middle of the run.',
    likely_causes: ['the agent process or its browser crashed or was killed'],
    next_steps: ['retry the run with a fresh workflow_id', 'use a fresh profile_id if the browser profile may be corrupted'],
  },
  all_steps_failed: {
    summary: 'Every step the run executed failed, and none of them halted it.',
    likely_causes: ['the site is down or unreachable from the plane', 'the plan does not match the page (selectors, labels)'],
    next_steps: ['read the failed steps: each has failure_class, final_url, a screenshot and data', 'mark the steps that must work `required: true` so the run halts at the first one'],
  },
  shutdown: {
    summary: 'The gateway shut down (SIGTERM or SIGINT) before the run finished, and the run did not end within SERVICE_SHUTDOWN_GRACE_MS, so it was halted and its browser closed.',
    likely_causes: ['a deploy, restart or scale-down stopped the gateway replica that executed the run', 'the run needed longer than the shutdown grace'],
    next_steps: ['resume it with POST /v1/predict {"action":"resume","run_id":...} (it restarts at the top-level step where it stopped)', 'raise SERVICE_SHUTDOWN_GRACE_MS (and the orchestrator\'s own grace) if runs should finish during a shutdown'],
  },
  runner_lost: {
    summary: 'The gateway process executing the run went away (crashed, was killed, or stalled past its lease), so another gateway ended the run rather than leave it running. It was not re-executed on its own, because a step may already have submitted a form or called a tool.',
    likely_causes: ['the gateway replica or its host was killed (SIGKILL, out of memory, a lost machine)', 'the gateway process stalled longer than SERVICE_RUN_LEASE_SECONDS'],
    next_steps: ['resume it with POST /v1/predict {"action":"resume","run_id":...}: it restarts at the top-level step where the runner was (resume_step), with a fresh screenshot', 'check the steps already recorded for side effects before resuming'],
  },
  safety_check_pending: {
    summary: "The model asked for a person to acknowledge a safety check before its next action (OpenAI's pending_safety_checks); the service never acknowledges one on its own, so the run stopped.",
    likely_causes: ['the page looks like a place where an action has consequences the model will not take alone (a payment, a sensitive site, an instruction on the page)'],
    next_steps: ['look at the last screenshot of the step to see what the model was about to do'],
  },
  human_failed: {
    summary: 'The run asked a person for help (a request_human step, an anti-bot check with on_challenge ask_human, or its brain) and the person pressed Fail.',
    likely_causes: ['the person could not do what the run asked (a second factor they do not have, a captcha that would not clear)', 'the page was not the one the person expected'],
    next_steps: ["read the person's note above and the run's takeover (GET /v1/runs/{run_id}/takeover)", 'fix what the person reported, then submit the run again or resume it'],
  },
  human_timeout: {
    summary: 'The run asked a person for help and nobody took over in time: the takeover link expired (SERVICE_TAKEOVER_SECONDS, or the step\'s params.timeout_seconds) before Done or Fail was pressed.',
    likely_causes: ['the link (in the run\'s takeover_requested event and webhook) reached nobody, or reached them too late', 'the person opened the page but did not press Done'],
    next_steps: ['make sure the run\'s webhook reaches someone who can act on it', 'raise params.timeout_seconds (up to SERVICE_TAKEOVER_MAX_SECONDS) or SERVICE_TAKEOVER_SECONDS', 'resume the run once a person is at hand'],
  },
  halt_timeout: {
    summary: 'A step did not finish within its own time limit.',
    likely_causes: ['a page or an agent call hung'],
    next_steps: ['retry the run; read the events to see which step hung'],
  },
};

const DEFAULT: Entry = {
  summary: 'The run halted for a reason this service has no specific advice for.',
  likely_causes: ['see the run events and logs'],
  next_steps: ['read the events and logs of the run', 'retry with a fresh workflow_id if the cause was transient'],
};

export function failureHelp(runId: string, haltClass: string, retriesSpent = 0, cause?: string): FailureHelp {
  const e = CATALOGUE[haltClass] ?? DEFAULT;
  // a cause that says what to do (a brain backend's failure does) gives the first next step too
  const [said, todo] = cause ? splitAdvice(cause) : [undefined, undefined];
  const base = `/v1/runs/${encodeURIComponent(runId)}`;
  return {
    halt_class: haltClass,
    summary: e.summary,
    // what this run met, when the runner knows it, before the class's usual causes
    likely_causes: [...(said ? [said] : []), ...e.likely_causes],
    next_steps: [...(todo ? [todo] : []), ...e.next_steps],
    debug_surfaces: {
      events: `${base}/events`,
      trace: `${base}/trace`,
      logs: `POST /v1/predict {"action":"logs","run_id":"${runId}"}`,
      phase: base,
      status: `${base}/status`,
      result: `${base}/result`,
    },
    retries_spent: retriesSpent,
  };
}

/**
 * The host the egress guard refused, when the run's last failed step was refused by it
 * (plugins/steps-core/egress-refusal.ts words it): the first likely cause of its failure_help.
 */
export function egressCause(steps: ReadonlyArray<{ success: boolean; data?: string }>): string | undefined {
  const data = steps.findLast((s) => !s.success)?.data;
  const m = data && /egress_refused: the egress guard refused (\S+) \(.*?\): (.*)$/s.exec(data);
  return m ? `the egress guard refused the host '${m[1]}': ${m[2]!.slice(0, 300)}` : undefined;
}

const ADVICE = '; what to do: ';

function splitAdvice(cause: string): [string, string | undefined] {
  const i = cause.indexOf(ADVICE);
  return i < 0 ? [cause, undefined] : [cause.slice(0, i), cause.slice(i + ADVICE.length)];
}

/**
 * What the brain backend said, when the run's last failed step failed on a model call: the
 * brain plugin's message names the backend (`brain <id> (<protocol> at <host>) ...`) and
 * what to do, which become the first likely cause and next step of its failure_help.
 */
export function brainCause(steps: ReadonlyArray<{ success: boolean; data?: string }>): string | undefined {
  const data = steps.findLast((s) => !s.success)?.data;
  // a refusal ends the step as the model giving up: `<brain> gave up: refusal: brain <id> (...) ...`
  // the runner writes a halting step's data as `halted (<class>): <the step's data>`
  const m = data && /^(?:halted \([a-z_]{1,64}\): )?(?:\S{1,64} gave up: refusal: )?(brain [a-z0-9][a-z0-9._-]{0,63} \([a-z-]+ at [^)]{1,300}\).*)$/s.exec(data);
  return m ? m[1]!.slice(0, 1000) : undefined;
}
