// What the runner tells a run's recorder. The runner knows steps, actions,
// screenshots, verdicts and halts; how they become a trace bundle (the capture
// SDK, a DSN to stream to) is the recorder's business, behind this interface.
import type { RunRecord } from '../runs/records.ts';
import type { StepEntry } from './run-state.ts';

export type RecordedLayer = 'planner' | 'grounding' | 'verifier' | 'recovery' | 'intervention';
/** the trace's decision kinds */
export type RecordedKind = 'propose' | 'select' | 'reject' | 'check' | 'retry' | 'replan' | 'fallback' | 'command' | 'note';

export interface RecordedStep {
  /** index of the step in the trace: executed steps in order, loop iterations included */
  index: number;
  path: string;
  type: string;
  intent: string;
  success: boolean;
  failure_class?: string;
  final_url: string;
  page_title: string;
  action?: { type: string; params: Record<string, unknown>; reasoning?: string };
  attempts: number;
  started_at: string;
  ended_at: string;
  cost_usd: number;
  /** verdict of the step's success contract or gate, when it had one */
  verdict?: { status: 'passed' | 'failed'; reason: string };
  data?: string;
}

export interface RunRecording {
  /** whether PNG screenshots are wanted (pre of the first step, post of each step) */
  readonly wantsScreenshots: boolean;
  decision(stepIndex: number | null, layer: RecordedLayer, kind: RecordedKind, summary: string, payload?: Record<string, unknown>): void;
  /** a step that changes the world outside the browser (submit): declared before, settled after */
  declareSideEffect(stepIndex: number, resource: string, action: string): string;
  settleSideEffect(id: string, committed: boolean, detail: string): void;
  step(s: RecordedStep, shots: { pre?: Buffer; post?: Buffer }): Promise<void>;
  /** the page when a person took it over and when they handed it back, on the step that asked (PNG) */
  interventionShots?(stepIndex: number, shots: { before?: Buffer; after?: Buffer }): void;
  /** one model call of a step (request without the screenshot, which is the step's observation) */
  modelIo(stepIndex: number, layer: string, request: { model: string; [k: string]: unknown }, response: Record<string, unknown>): void;
  /** ends the recording with the run's outcome once the local trace is written; live uploads may go on (see RunRecorder.drain); never throws */
  close(outcome: { status: string; halt_class?: string | null; summary: string; cost_usd: number }): Promise<void>;
}

/** What a trace is recorded for: a run, or a browser session (gateway/sessions), which has these fields of a run's. */
export type TraceSubject = Pick<RunRecord, 'run_id' | 'tenant_id' | 'created_at' | 'cua_model'> & { runtime: { compute_backend: string; capture_mode?: unknown } };

export interface RunRecorder {
  /**
   * A recording for this run (or session), or undefined when it is not recorded. `staged: false`:
   * no staging note, so a process that dies leaves nothing for its next start to commit (a
   * session: no run record to commit it from).
   */
  begin(run: TraceSubject, o?: { staged?: boolean }): Promise<RunRecording | undefined>;
  /**
   * Commits the bundle a dead process staged for this ended run and never
   * committed (its screenshots, the run record's steps, the record's status,
   * `note` as a recovery decision); false when there is none to finish here.
   */
  finishStaged?(run: RunRecord, note: string): Promise<boolean>;
  /**
   * True while this process records the run: its runner closes the recording with the
   * record's end, whoever wrote it, so recovery here writes no bundle of its own.
   */
  recording?(runId: string): boolean;
  /** waits for work the recordings left running after their runs ended (live uploads); called on shutdown */
  drain?(): Promise<void>;
}

/** A step as the run record keeps it (no per-step times: both are `at`), as the recorder takes it. */
export function recordedFromEntry(st: StepEntry, index: number, at: string): RecordedStep {
  return {
    index,
    path: st.path,
    type: st.type,
    intent: st.intent,
    success: st.success,
    ...(st.failure_class ? { failure_class: st.failure_class } : {}),
    final_url: st.final_url ?? '',
    page_title: st.page_title ?? '',
    ...(st.last_action ? { action: st.last_action } : {}),
    attempts: st.attempts ?? 1,
    started_at: at,
    ended_at: at,
    cost_usd: 0,
    ...(st.data ? { data: st.data } : {}),
  };
}
