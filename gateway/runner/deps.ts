// What the runner is given: the store it writes a run through, and its dependencies.
// Its own module so the runner's parts (executor, walker, progress, ride-out) share the
// types without importing one another.
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import type { Brain, SecretRef, StepHandler } from '../plugins/contract.ts';
import type { RunRecord } from '../runs/records.ts';
import type { RunOutcome } from '../runs/runs-service.ts';
import type { EventListener } from '../runs/events.ts';
import type { FrameHub } from '../runs/frames.ts';
import type { PlaneProvider } from './planes.ts';
import type { RunRecorder } from './recording.ts';
import type { ProfileSyncs } from './profile-sync.ts';
import type { LiveRuns, TakeoverDesk } from './human.ts';
import type { ReplayService } from '../replay/service.ts';

export interface RunnerStore {
  load(runId: string): Promise<RunRecord | undefined>;
  /** a fenced write: false once the run has ended or `owner` no longer holds its lease */
  save(r: RunRecord, owner: string): Promise<boolean>;
  /** `ts`: when the event happened (now when absent); a write tried again gives the same, so `emitted` can recognise it */
  emit(r: RunRecord, type: string, data: Record<string, unknown>, ts?: string): Promise<void>;
  /** emit, only while `owner` holds the run's lease and the run is unfinished; false: not appended */
  emitFenced(r: RunRecord, owner: string, type: string, data: Record<string, unknown>, ts?: string): Promise<boolean>;
  /** save, then emit only if the save held, as one write where the store can; false as save's */
  saveAndEmit(r: RunRecord, owner: string, type: string, data: Record<string, unknown>, ts?: string): Promise<boolean>;
  /** true when the run's log holds this event (a write whose commit landed though its answer was lost) */
  emitted(runId: string, e: { type: string; ts: string; data: Record<string, unknown> }): Promise<boolean>;
  end(r: RunRecord, outcome: RunOutcome): Promise<RunRecord>;
  claimForRunner(runId: string, owner: string, ttlMs: number): Promise<boolean>;
  renewRunner(runId: string, owner: string, ttlMs: number): Promise<boolean>;
  releaseRunner(runId: string, owner: string): Promise<void>;
  subscribe(topic: string, listener: EventListener): () => void;
  /** true when `err` says the store could not be reached (a restart): the write may be tried again */
  unreachable(err: unknown): boolean;
}

export interface RunnerDeps {
  store: RunnerStore;
  planes: PlaneProvider;
  /** the handler of a step type (the registry falls back to the generic '*' handler) */
  handler(type: string): StepHandler | undefined;
  /** a registered brain bound to a tenant (its model-provider key and prompts) */
  brain(id: string, tenantId: string): Brain | undefined;
  /** a registered host tool; throws for an unknown tool or args its schema refuses */
  callTool(name: string, args: Record<string, unknown>, ctx: { runId: string; tenantId: string; signal: AbortSignal }): Promise<unknown>;
  recipe(tenantId: string, name: string): Promise<Record<string, unknown>>;
  /** a credential's value for a page (the vault's reveal: the origin check, a TOTP code computed now); absent: no vault, steps that name a credential fail */
  reveal?(tenantId: string, ref: SecretRef, pageUrl: string): Promise<{ value: string } | { refused: string }>;
  metrics: Metrics;
  log: Logger;
  /** run directories live under <dataDir>/runs/<tenant_id>/<run_id> */
  dataDir: string;
  owner: string;
  /** the runner's lease on a run it executes, renewed every third of it (SERVICE_RUN_LEASE_SECONDS) */
  leaseMs: number;
  maxLoopIterations: number;
  /** most steps one run may execute, loop iterations included (SERVICE_MAX_RUN_STEPS) */
  maxRunSteps: number;
  /** model calls a run may spend while on one URL (0: no limit) */
  urlContextBudget?: number;
  /** longest a single step may take */
  stepTimeoutMs: number;
  /** records each run as a trace; absent: runs are not recorded */
  recorder?: RunRecorder;
  /** live frames for watchers who asked for them */
  frames?: FrameHub;
  /** the takeover service: steps may ask for a person (issue 42); absent: askHuman is not offered */
  takeover?: TakeoverDesk;
  /** where a running run's page is, for its live screen and an operator's takeover on any replica; absent: neither is offered */
  liveRuns?: LiveRuns;
  /** profiles that follow the tenant: loaded into the plane at open, saved after the end; absent: the agent's own dir */
  profiles?: ProfileSyncs;
  /** compiled plans: what a run's brain steps compile into, and the replays of them (issue 45) */
  replay?: ReplayService;
}
