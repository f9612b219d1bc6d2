// What a run's trace is made of, shared by the recorder and the sweep of staged bundles:
// where a bundle lives, a run's status and tags in it, a recorded step as the SDK takes it.
import path from 'node:path';
import type { StepInput } from '../../sdk/index.ts';
import { runDir, type RunRecord } from '../runs/records.ts';
import type { RecordedStep, TraceSubject } from '../runner/recording.ts';

/** Where a run's bundle is written. */
export const traceDir = (dataDir: string, run: Pick<RunRecord, 'tenant_id' | 'run_id'>): string => path.join(runDir(dataDir, run), 'trace');

const TRACE_STATUS: Record<string, 'passed' | 'failed' | 'halted' | 'cancelled'> = { succeeded: 'passed', failed: 'failed', cancelled: 'cancelled' };

/** A run's status in its trace: a failed run with a halt class is halted; anything not succeeded is never passed. */
export const traceStatus = (status: string, haltClass?: string | null): 'passed' | 'failed' | 'halted' | 'cancelled' =>
  haltClass && status === 'failed' ? 'halted' : (TRACE_STATUS[status] ?? 'failed');

/** The tags every bundle of a run carries. */
export const traceTags = (run: TraceSubject): Record<string, string> => ({ tenant_id: run.tenant_id, compute_backend: run.runtime.compute_backend, cua_model: run.cua_model });

/** A recorded step as the SDK takes it. */
export function stepInput(st: RecordedStep): StepInput {
  return {
    step_index: st.index,
    status: st.success ? 'passed' : 'failed',
    failure_class: st.failure_class ?? null,
    ...(st.action ? { action: { type: st.action.type, params: st.action.params } } : {}),
    ...(st.verdict ? { verdict: { status: st.verdict.status, reason: st.verdict.reason, comparator: 'verifier' as const } } : {}),
    costs: { total_usd: st.cost_usd },
    latency: { total_ms: Date.parse(st.ended_at) - Date.parse(st.started_at) },
    started_at: st.started_at,
    ended_at: st.ended_at,
    // our additions (extra keys are tolerated by the schema): where the step sits in the plan and where it left the page
    plan_path: st.path,
    step_type: st.type,
    intent: st.intent,
    final_url: st.final_url,
    page_title: st.page_title,
    attempts: st.attempts,
    ...(st.data ? { detail: st.data.slice(0, 1000) } : {}),
  };
}
