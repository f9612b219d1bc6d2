// The run record and the bodies the spec derives from it.
import path from 'node:path';
import type { NormalizedPlan } from './plan-policy.ts';
import type { DeliveryAttempt, WebhookTarget } from './webhooks.ts';
import type { RunView } from '../state/tables.ts';

export const RUN_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'cancelled'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

export interface FailureHelp {
  halt_class: string;
  summary: string;
  likely_causes: string[];
  next_steps: string[];
  debug_surfaces: Record<'events' | 'trace' | 'logs' | 'phase' | 'status' | 'result', string>;
  retries_spent: number;
}

export interface EffectiveRuntime {
  compute_backend: 'computer_plane' | 'dom_plane';
  proxy_provider: string;
  max_cost: number;
  max_time_minutes: number;
  [k: string]: unknown;
}

/** What a run record keeps of its replay (issue 45): the key its plan compiles under, and the compiled plan it runs, if any. */
export interface RunReplay {
  cache_key: string;
  compiled_plan_id?: string;
  /** the run the compiled plan was compiled from */
  replayed_from?: string;
}

export interface RunRecord {
  run_id: string;
  tenant_id: string;
  status: RunStatus;
  phase: string;
  halt_class: string | null;
  failure_help: FailureHelp | null;
  error: string | null;
  created_at: string;
  updated_at: string;
  ended_at: string | null;
  cua_model: string;
  profile_id: string | null;
  workflow_id: string | null;
  callback_url: string | null;
  detached: boolean;
  plan: NormalizedPlan;
  runtime: EffectiveRuntime;
  summary: string;
  steps: unknown[];
  unknown_placeholder_row_count: number;
  /** extraction_quality counters beyond the placeholder rows (dropped_partial_row_count, spam_row_count, excluded_card_count); absent on older runs */
  extraction_counts?: Record<string, number>;
  events: string[];
  webhook: WebhookTarget | null;
  webhook_deliveries: DeliveryAttempt[];
  /** The run this one resumes (action resume), or null. */
  resumed_from?: string | null;
  /** Top-level step index the runner starts at (0, or where the resumed run stopped). */
  start_step?: number;
  /** Top-level step index a resume of this run would restart at; null when there is nothing to resume. */
  resume_step?: number | null;
  /** what the run's model calls cost (USD), set when it ends */
  cost_usd?: number;
  /** The tenant's allowed_domains when the run was accepted: the plane's egress guard holds the run to them (absent on older runs: no restriction). */
  allowed_domains?: string[];
  /** While running: the top-level step the runner is on, saved with the steps (where recovery points a resume). */
  checkpoint_step?: number;
  /** its plan's cache key, and the compiled plan it replays (issue 45); absent on older runs */
  replay?: RunReplay;
}

/** The run's directory: tenant-prefixed under the data dir. */
export function runDir(dataDir: string, run: Pick<RunRecord, 'tenant_id' | 'run_id'>): string {
  return path.join(dataDir, 'runs', run.tenant_id, run.run_id);
}

export const TERMINAL: ReadonlySet<RunStatus> = new Set(['succeeded', 'failed', 'cancelled']);

export function statusBody(r: Pick<RunRecord, 'run_id' | 'status' | 'phase' | 'halt_class' | 'failure_help' | 'created_at' | 'updated_at' | 'ended_at'>) {
  return {
    run_id: r.run_id,
    status: r.status,
    phase: r.phase,
    halt_class: r.halt_class,
    failure_help: r.failure_help,
    created_at: r.created_at,
    updated_at: r.updated_at,
    ended_at: r.ended_at,
  };
}

/** A URL without credentials or query (they may carry secrets) for showing back. */
function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(invalid URL)';
  }
}

export type LifecycleBody = ReturnType<typeof lifecycleBody>;

export function lifecycleBody(r: RunRecord) {
  // not `{ ...statusBody(r), ... }`: an object spread followed by more keys cost 10 µs a call on Node 20, Object.assign 0.25
  return Object.assign(statusBody(r), {
    cua_model: r.cua_model,
    profile_id: r.profile_id,
    workflow_id: r.workflow_id,
    compute_backend: r.runtime.compute_backend,
    capture_mode: r.runtime.capture_mode ?? null,
    limits: { max_cost: r.runtime.max_cost, max_time_minutes: r.runtime.max_time_minutes },
    step_count: r.plan.steps.length,
    resumed_from: r.resumed_from ?? null,
    start_step: r.start_step ?? 0,
    resume_step: r.resume_step ?? null,
    cost_usd: r.cost_usd ?? 0,
    webhook: r.webhook ? { url: redactUrl(r.webhook.url), signed: r.webhook.secret_name !== '', deliveries: r.webhook_deliveries } : null,
  });
}

/** A run's lifecycle body with its tenant: what a status poll, GET /v1/runs/{id} and a runs list read of a run. */
export type RunLifecycle = LifecycleBody & { tenant_id: string };

/**
 * The run view the store keeps beside each row (RunTable.view): computed once a write, so a
 * poll or a list page reads a few hundred bytes instead of a body with every step and log line.
 * Bump `version` whenever lifecycleBody answers differently: older heads are then read from
 * their body until the row's next write.
 */
export const RUN_VIEW: RunView<RunRecord, RunLifecycle> = { version: 1, of: (r) => Object.assign(lifecycleBody(r), { tenant_id: r.tenant_id }) };

/** The lifecycle body of a view: the view without its tenant (taken off in place: every view read is a new object). */
export function lifecycleOf(v: RunLifecycle): LifecycleBody {
  const body: Partial<RunLifecycle> = v;
  delete body.tenant_id;
  return body as LifecycleBody;
}

export function resultBody(r: RunRecord) {
  return {
    status: r.status,
    run_id: r.run_id,
    ...(r.error ? { error: r.error } : {}),
    summary: r.summary,
    steps: r.steps,
    extraction_quality: { unknown_placeholder_row_count: r.unknown_placeholder_row_count, dropped_partial_row_count: 0, spam_row_count: 0, excluded_card_count: 0, ...r.extraction_counts },
  };
}

export function logsBody(r: RunRecord, tail?: number) {
  return { events: tail ? r.events.slice(-tail) : r.events };
}
