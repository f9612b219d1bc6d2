// DebugSession: records one agent run into a bundle (written atomically on
// close) and, with a DSN, streams every record live to the ingest service.
// Python's context manager becomes `await using` or withDebugSession().
// The class is the public face: its state lives in a SessionCore and each kind
// of record is made by its own module, so a method here only delegates.
import path from 'node:path';
import type {
  CaptureMode,
  CapturedVersions,
  Costs,
  DecisionEvent,
  EnvFingerprint,
  EvalCandidate,
  JudgeDecision,
  Manifest,
  ModelIoRecord,
  OutcomeRecord,
  ReasoningRecord,
  RunStatus,
  SideEffect,
  StepCosts,
  StepRecord,
  SubgoalCompletion,
  TaskSpec,
  TraceDocument,
  Verdict,
} from '../schemas/trace/types.gen.ts';
import type { Adapter } from './adapter.ts';
import { copyReplayPrefix, resolveBranch } from './branching.ts';
import { buildManifest, traceDocument, writeBundle } from './bundle-writer.ts';
import { captures, isCaptureMode, resolveCaptureMode } from './capture.ts';
import * as costs from './costs.ts';
import { bindIntervention } from './intervention.ts';
import * as modelIo from './model-io.ts';
import * as outcomes from './outcomes.ts';
import { RedactionPolicy } from './redaction.ts';
import { SessionCore, type SessionIdentity } from './session-core.ts';
import type { BranchFromOptions, BranchMode, DebugSessionOptions, OrchestratorOptions, StepInput } from './session-options.ts';
import * as sideEffects from './side-effects.ts';
import * as annotations from './step-annotations.ts';
import * as steps from './step-recording.ts';
import type { ObservationKind } from './validate.ts';
import { FileStore, type Store } from './store.ts';
import type { DroppedRecord } from './stream.ts';
import { ValueError, defaultLogger, newId, safeId } from './util.ts';
import * as verdicts from './verdicts.ts';

export { rollupCosts, trajectoryFingerprint } from './costs.ts';
export { LOG_FILE_LIMIT } from './model-io.ts';
export type { BranchFromOptions, BranchMode, DebugSessionOptions, OrchestratorOptions, StepInput, StreamOptions } from './session-options.ts';

export class DebugSession implements SessionIdentity {
  readonly runId: string;
  readonly debugSessionId: string;
  readonly clientName: string;
  readonly outDir: string;
  readonly store: Store;
  readonly redaction: RedactionPolicy;
  readonly captureLogprobs: boolean;
  private readonly core: SessionCore;

  constructor(opts: DebugSessionOptions) {
    if (!opts.clientName) throw new ValueError('clientName is required');
    if (!opts.outDir) throw new ValueError('outDir is required');
    this.runId = safeId('runId', opts.runId);
    this.clientName = opts.clientName;
    this.outDir = path.resolve(opts.outDir);
    this.debugSessionId = safeId('debugSessionId', opts.debugSessionId ?? newId('dbg_'));
    this.store = opts.store ?? new FileStore(this.outDir);
    this.redaction = opts.redactionPolicy ?? RedactionPolicy.default();
    this.captureLogprobs = opts.captureLogprobs ?? false;
    const core = new SessionCore(this, opts);
    this.core = core;
    if (core.streamer) {
      core.post({ kind: 'manifest', method: 'POST', path: '/runs', key: 'manifest', body: () => core.manifest ?? buildManifest(core, null) });
      core.startHeartbeat();
    }
  }

  // ---------------------------------------------------------------- properties

  get isStreaming(): boolean {
    return this.core.streamer !== null;
  }

  get isOrchestrator(): boolean {
    return this.core.orchestrator;
  }

  get branchMode(): BranchMode | null {
    return this.core.branch;
  }

  get isClosed(): boolean {
    return this.core.manifest !== null;
  }

  get currentCaptureMode(): CaptureMode {
    return this.core.captureMode;
  }

  /** True when the session's capture mode captures at least `mode` (adapters use it to decide what to take). */
  captures(mode: CaptureMode): boolean {
    return captures(this.core.captureMode, mode);
  }

  /** Live streaming counters (sent, dropped, failed, retried, batches), or null without a DSN. */
  get streamStats() {
    const streamer = this.core.streamer;
    return streamer ? { ...streamer.stats, modelio_latched: streamer.modelioLatched, queue_depth: streamer.depth } : null;
  }

  /** Records the ingest did not take while streaming (429 twice, 5xx, unreachable, queue full), each marked recovered once close() re-sent it (never one refused with 429 twice: dropped, as the spec's client); empty without a DSN. */
  get dropLedger(): ReadonlyArray<Readonly<DroppedRecord>> {
    return this.core.streamer?.ledger.map((d) => ({ ...d })) ?? [];
  }

  // ---------------------------------------------------------------- steps

  /**
   * Records a step. A new step_id under an index that already has a canonical
   * step is deprecated: it warns and is stored as an iteration of that step.
   */
  recordStep(input: StepInput): StepRecord {
    return steps.recordStep(this.core, input);
  }

  /** Adds an iteration under an existing canonical step (by index or step_id) and bumps its step_iterations. */
  recordStepIteration(stepIdOrIndex: string | number, iteration: Partial<StepRecord>): StepRecord {
    return steps.recordStepIteration(this.core, stepIdOrIndex, iteration);
  }

  recordEvent(event: Partial<DecisionEvent> & Pick<DecisionEvent, 'layer' | 'kind'>): DecisionEvent {
    return steps.recordEvent(this.core, event);
  }

  /** Stores a screenshot (PNG bytes) as screenshots/<NNNN>_<kind>.png and returns that path. */
  attachObservation(stepIndex: number, kind: ObservationKind, png: Uint8Array): Promise<string> {
    return steps.attachObservation(this.core, stepIndex, kind, png);
  }

  // ---------------------------------------------------------------- session metadata

  setStatus(status: RunStatus): void {
    this.core.setStatus(status);
  }

  addTag(key: string, value: string): void {
    this.core.session.tags = { ...(this.core.session.tags ?? {}), [key]: String(value) };
  }

  setLiveEndpoints(endpoints: { status_url?: string | null; video_url?: string | null; reasoning_url?: string | null }): void {
    this.core.session.live_endpoints = { status_url: endpoints.status_url ?? null, video_url: endpoints.video_url ?? null, reasoning_url: endpoints.reasoning_url ?? null };
  }

  /** Later steps are stamped with this mode unless they carry their own. */
  setCaptureMode(mode: CaptureMode | string): void {
    this.core.captureMode = resolveCaptureMode(mode);
    this.core.session.capture_mode = this.core.captureMode;
  }

  /**
   * Appends to logs/<name>.log (or logs/step-<idx>.log) and posts it live.
   * Each log file is bounded at 1 MB: an append that would pass it is dropped.
   */
  appendLog(text: string, opts: modelIo.LogOptions = {}): void {
    modelIo.appendLog(this.core, text, opts);
  }

  // ---------------------------------------------------------------- verdicts, costs, scores

  /**
   * Replaces the step's verdict with a verifier's; composes the reason from
   * check, expected and actual when none is given, and adds an implicit rule
   * judge decision (judge_id attach_verifier).
   */
  attachVerifier(stepIndex: number, v: verdicts.VerifierInput): Verdict {
    return verdicts.attachVerifier(this.core, stepIndex, v);
  }

  /** Merges into the run-level costs; with streaming PUTs the cumulative object whenever something was set. */
  setCosts(patch: Partial<Costs>): Costs {
    return costs.setCosts(this.core, patch);
  }

  setStepCosts(stepIndex: number, patch: Partial<StepCosts>): StepCosts {
    return costs.setStepCosts(this.core, stepIndex, patch);
  }

  /** Merges a score into the step's verdict; score and uncertainty are clamped to 0..1. */
  setScore(stepIndex: number, score: number, opts: verdicts.ScoreOptions = {}): Verdict {
    return verdicts.setScore(this.core, stepIndex, score, opts);
  }

  recordJudgeDecision(stepIndex: number, d: verdicts.JudgeDecisionInput): JudgeDecision {
    return verdicts.recordJudgeDecision(this.core, stepIndex, d);
  }

  /** Tags a step for evaluation; idempotent per step (the first mark stays). */
  markForEval(stepIndex: number, opts: { reason: string; candidateClusterId?: string | null }): EvalCandidate {
    return outcomes.markForEval(this.core, stepIndex, opts);
  }

  /**
   * Writes an outcome (outcomes.json). Session scope rolls up the step costs
   * under the session-level costs (set_costs wins ties) unless a cost summary is given.
   */
  finalizeOutcome(opts: outcomes.OutcomeInput): OutcomeRecord {
    return outcomes.finalizeOutcome(this.core, opts);
  }

  /** The cost summary of the last passed session outcome, or null. */
  successfulTaskCostSummary(): Costs | null {
    return outcomes.successfulTaskCostSummary(this.core);
  }

  recordReasoning(stepIndex: number | null, text: string, opts: modelIo.ReasoningOptions = {}): ReasoningRecord {
    return modelIo.recordReasoning(this.core, stepIndex, text, opts);
  }

  // ---------------------------------------------------------------- model io

  /**
   * Validates, redacts and stores one model call; idempotent on prompt_hash
   * (a second record with the same hash returns the first path). Stamps the
   * model and prompt_hash into the step's captured_versions.
   */
  recordModelio(record: ModelIoRecord | Record<string, unknown>, opts: modelIo.ModelioOptions = {}): Promise<string> {
    return modelIo.recordModelio(this.core, record, opts);
  }

  setStepVersions(stepIndex: number, versions: Partial<CapturedVersions>): CapturedVersions {
    return annotations.setStepVersions(this.core, stepIndex, versions);
  }

  /** Stores the structural fingerprint the caller computed (the SDK never derives dom_hash). */
  attachEnvFingerprint(stepIndex: number, fp: EnvFingerprint): EnvFingerprint {
    return annotations.attachEnvFingerprint(this.core, stepIndex, fp);
  }

  // ---------------------------------------------------------------- task spec, groups, subgoals

  setTaskSpec(spec: TaskSpec): void {
    this.core.checkOrThrow('task-spec', spec);
    this.core.session.task_spec = structuredClone(spec);
    this.core.session.task_spec_id = spec.task_spec_id;
  }

  setTaskSpecId(id: string | null): void {
    this.core.session.task_spec_id = id;
  }

  /** Late group id: stamped on every step that has none (now and at close). */
  setGroupId(groupId: string | null): void {
    this.core.session.group_id = groupId;
    if (groupId) for (const s of this.core.steps.values()) if (s.group_id === undefined || s.group_id === null) s.group_id = groupId;
  }

  recordSubgoalCompletion(stepIndex: number, subgoalId: string, completion: number): SubgoalCompletion {
    return annotations.recordSubgoalCompletion(this.core, stepIndex, subgoalId, completion);
  }

  setLoopDetected(stepIndex: number, value = true): void {
    annotations.setLoopDetected(this.core, stepIndex, value);
  }

  /** A pairwise preference about a step (preferences/<NNNN>.json); our addition for the preferences route. */
  recordPreference(stepIndex: number, preference: Record<string, unknown>): void {
    annotations.recordPreference(this.core, stepIndex, preference);
  }

  // ---------------------------------------------------------------- side effects

  declareSideEffect(d: sideEffects.SideEffectDeclaration): string {
    return sideEffects.declareSideEffect(this.core, d);
  }

  commitSideEffect(id: string, observedResult?: unknown): SideEffect {
    return sideEffects.commitSideEffect(this.core, id, observedResult);
  }

  markSideEffectAborted(id: string, reason: string): SideEffect {
    return sideEffects.markSideEffectAborted(this.core, id, reason);
  }

  /** Aborts every declared (not yet committed) side effect; returns their ids. */
  abortPendingSideEffects(reason: string): string[] {
    return sideEffects.abortPendingSideEffects(this.core, reason);
  }

  sideEffect(id: string): SideEffect | undefined {
    return sideEffects.sideEffect(this.core, id);
  }

  // ---------------------------------------------------------------- intervention

  /**
   * Starts the command long-poll (GET /runs/{id}/commands) and dispatches each
   * new command to the adapter; returns null without streaming. Commands are
   * deduped on command_id and the poll resumes from its cursor; each is logged
   * as a decision event. kill aborts pending side effects before on_kill.
   */
  bindIntervention(adapter: Adapter, pollTimeout = 25.0): { stop(): Promise<void> } | null {
    return bindIntervention(this.core, adapter, pollTimeout);
  }

  // ---------------------------------------------------------------- close

  /** The trace document as it stands (trace.json). */
  traceDocument(): TraceDocument {
    return traceDocument(this.core);
  }

  /**
   * Writes the bundle (atomically on the file store) and returns the manifest,
   * once the live stream drained too. Idempotent. With `{upload: 'background'}`
   * it returns as soon as the bundle is written; the caller then owns
   * `uploaded()` (await it before the process exits, or records are lost).
   */
  async close(status?: RunStatus | null, opts: { upload?: 'wait' | 'background' } = {}): Promise<Manifest> {
    this.core.closing ??= writeBundle(this.core, status ?? null);
    const manifest = await this.core.closing;
    if (opts.upload !== 'background') await this.uploaded();
    return manifest;
  }

  /** Resolves when the records streamed at close went out (or were dropped at the flush deadline); never rejects. */
  async uploaded(): Promise<void> {
    await this.core.closing?.catch(() => undefined);
    await this.core.uploading?.catch(() => undefined);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // ---------------------------------------------------------------- constructors

  /**
   * A session that branches from a parent run. mode auto resolves to sandbox
   * for an action mutation, else replay; replay copies the parent's steps
   * before the branch point and their screenshots (refused for an action mutation).
   */
  static async branchFrom(opts: BranchFromOptions): Promise<DebugSession> {
    const { mode, id, branchContext } = resolveBranch(opts);
    const session = new DebugSession({ ...opts, runId: opts.runId ?? id, branchContext });
    session.core.branch = mode;
    if (mode === 'replay') await copyReplayPrefix(session.core, opts.parentBundle!, opts.branchPointStepIndex);
    return session;
  }

  /** A parent-only session (session_type orchestrator): it records events, costs and outcomes, never steps. */
  static openOrchestrator(opts: OrchestratorOptions): DebugSession {
    const tags: Record<string, string> = { ...(opts.tags ?? {}), session_type: 'orchestrator' };
    if (opts.sessionName) tags.session_name = opts.sessionName;
    if (opts.tenantId) tags.tenant_id = opts.tenantId;
    const session = new DebugSession({ ...opts, tags });
    session.core.orchestrator = true;
    return session;
  }
}

/**
 * Runs fn inside a session: a normal return closes with `status` (default
 * passed, or whatever fn set), an exception closes the run as halted, still
 * writes the bundle, and rethrows.
 */
export async function withDebugSession<T>(options: DebugSessionOptions & { status?: RunStatus }, fn: (session: DebugSession) => Promise<T> | T): Promise<T> {
  const session = new DebugSession(options);
  let result: T;
  try {
    result = await fn(session);
  } catch (err) {
    await session.close('halted').catch((closeErr: Error) => (options.logger ?? defaultLogger).warn(`closing the halted session failed: ${closeErr.message}`));
    throw err;
  }
  await session.close(options.status ?? null);
  return result;
}

export { isCaptureMode };
