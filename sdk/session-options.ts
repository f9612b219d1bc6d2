// The options a DebugSession takes, apart from the class so that the
// collaborators it owns can name them without importing the class.
import type { BranchContext, CaptureMode, MutatedAxis, StepRecord, TaskSpec } from '../schemas/trace/types.gen.ts';
import type { RedactionPolicy } from './redaction.ts';
import type { Store } from './store.ts';
import type { SdkLogger } from './util.ts';

export type BranchMode = 'replay' | 'sandbox';

export interface StreamOptions {
  /** records waiting at most (default 5000) */
  queueMax?: number;
  /** records per batch request; 1 turns the batch route off (default 200) */
  batchMax?: number;
  /** how long a record waits for later ones to go in the same request (default 0: the next turn) */
  lingerMs?: number;
  /** heartbeat period (default 15 s) */
  heartbeatIntervalMs?: number;
  /** how long close() waits for the queue to drain (default 5 s) */
  flushTimeoutMs?: number;
  fetch?: typeof fetch;
}

export interface DebugSessionOptions {
  runId: string;
  clientName: string;
  outDir: string;
  clientVersion?: string | null;
  clientGitSha?: string | null;
  /** default: env TRACE_CAPTURE_MODE, else off */
  captureMode?: CaptureMode | string | null;
  /** default dbg_<uuid12> */
  debugSessionId?: string;
  redactionPolicy?: RedactionPolicy;
  /** default: a FileStore rooted at outDir */
  store?: Store;
  tags?: Record<string, string>;
  startedAt?: string;
  /** default env TRACE_DSN; null turns streaming off whatever the environment says */
  dsn?: string | null;
  captureLogprobs?: boolean;
  taskSpec?: TaskSpec | null;
  taskSpecId?: string | null;
  groupId?: string | null;
  branchContext?: BranchContext | null;
  // ---- our additions
  logger?: SdkLogger;
  stream?: StreamOptions;
  /** environment read for TRACE_CAPTURE_MODE and TRACE_DSN (default process.env) */
  env?: Record<string, string | undefined>;
  /** rule packs run on close (default ['builtin']) */
  rulePacks?: string[];
}

export interface StepInput extends Partial<StepRecord> {
  step_index: number;
}

export interface BranchFromOptions extends Omit<DebugSessionOptions, 'runId' | 'branchContext'> {
  parentRunId: string;
  branchPointStepIndex: number;
  mutatedAxis: MutatedAxis;
  mutation?: Record<string, unknown>;
  mode?: 'auto' | BranchMode;
  /** the parent's bundle (directory or store); required for replay */
  parentBundle?: string | Store;
  branchId?: string;
  runId?: string;
}

export interface OrchestratorOptions extends DebugSessionOptions {
  sessionName?: string;
  tenantId?: string;
}
