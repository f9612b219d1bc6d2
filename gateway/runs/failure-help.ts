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
};

const DEFAULT: Entry = {
  summary: 'The run halted for a reason this service has no specific advice for.',
  likely_causes: ['see the run events and logs'],
  next_steps: ['read the events and logs of the run', 'retry with a fresh workflow_id if the cause was transient'],
};

export function failureHelp(runId: string, haltClass: string, retriesSpent = 0): FailureHelp {
  const e = CATALOGUE[haltClass] ?? DEFAULT;
  const base = `/v1/runs/${encodeURIComponent(runId)}`;
  return {
    halt_class: haltClass,
    summary: e.summary,
    likely_causes: [...e.likely_causes],
    next_steps: [...e.next_steps],
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
