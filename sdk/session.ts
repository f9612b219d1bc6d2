// DebugSession: records one agent run into a bundle (written atomically on
// close) and, with a DSN, streams every record live to the ingest service.
// Python's context manager becomes `await using` or withDebugSession().
import path from 'node:path';
import type {
  BranchContext,
  CaptureMode,
  Costs,
  CapturedVersions,
  DecisionEvent,
  EnvFingerprint,
  EvalCandidate,
  JudgeDecision,
  Manifest,
  ModelIoRecord,
  OutcomeRecord,
  ReasoningRecord,
  RunStatus,
  SessionRecord,
  SideEffect,
  StepCosts,
  StepRecord,
  SubgoalCompletion,
  TaskSpec,
  TraceDocument,
  Verdict,
  MutatedAxis,
} from '../schemas/trace/types.gen.ts';
import { TRACE_SCHEMA_FILES, bundleJson, checkRecord, jsonLine, traceSchemaBytes, traceSchemaVersions } from '../schemas/trace/index.ts';
import type { ActionOverrideCoords, Adapter } from './adapter.ts';
import { captures, isCaptureMode, resolveCaptureMode } from './capture.ts';
import { BundleContext, RulesEngine } from './diagnostics.ts';
import { phash64 } from './phash.ts';
import { RedactionPolicy } from './redaction.ts';
import { FileStore, type StagedStore, type Store, writeBytes } from './store.ts';
import { Streamer, type StreamJob } from './stream.ts';
import { RuntimeError, SDK_VERSION, ValueError, canonicalJson, clamp01, defaultLogger, newId, nowIso, pad4, safeId, sha256Hex, shortId, type SdkLogger } from './util.ts';
import { isPng } from './validate.ts';

export const LOG_FILE_LIMIT = 1024 * 1024;
const COMPARATORS = ['verifier', 'model-judge', 'exact-match', 'human'] as const;
const COST_KEYS = ['total_usd', 'model_usd', 'gpu_usd', 'proxy_usd', 'tokens_in', 'tokens_out', 'cache_hit_tokens'] as const;
const STEP_COST_KEYS = ['total_usd', 'model_usd', 'tokens_in', 'tokens_out', 'cache_hit_tokens'] as const;
const INT_COST_KEYS = new Set(['tokens_in', 'tokens_out', 'cache_hit_tokens']);

export type BranchMode = 'replay' | 'sandbox';

export interface StreamOptions {
  /** records waiting at most (default 5000) */
  queueMax?: number;
  /** records per batch request; 1 turns the batch route off (default 200) */
  batchMax?: number;
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

interface LogFile {
  text: string;
  bytes: number;
  truncated: boolean;
}

/** Sums step costs key by key, then lays the session-level costs over them (the session wins ties). */
export function rollupCosts(steps: Iterable<StepRecord>, session: Costs): Costs {
  const out: Costs = {};
  for (const s of steps) {
    for (const k of STEP_COST_KEYS) {
      const v = s.costs?.[k];
      if (typeof v === 'number') out[k] = (out[k] ?? 0) + v;
    }
  }
  for (const k of STEP_COST_KEYS) if (!INT_COST_KEYS.has(k) && typeof out[k] === 'number') out[k] = Math.round(out[k] * 1e9) / 1e9;
  return { ...out, ...session };
}

/** sha256 over the canonical sequence of (step_index, action, status): the same path through a task hashes the same. */
export function trajectoryFingerprint(steps: StepRecord[]): string {
  return sha256Hex(canonicalJson(steps.map((s) => [s.step_index, s.action?.type ?? null, s.action?.params ?? null, s.status ?? null])));
}

export class DebugSession {
  readonly runId: string;
  readonly debugSessionId: string;
  readonly clientName: string;
  readonly outDir: string;
  readonly store: Store;
  readonly redaction: RedactionPolicy;
  readonly captureLogprobs: boolean;
  private status: RunStatus = 'running';
  private captureMode: CaptureMode;
  private readonly session: SessionRecord;
  private readonly log: SdkLogger;
  private readonly streamer: Streamer | null;
  private readonly streamOpts: StreamOptions;
  private readonly rulePacks: string[];
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private lastEvent: string | null = null;

  private readonly steps = new Map<number, StepRecord>();
  private readonly iterations = new Map<number, StepRecord[]>();
  private readonly events = new Map<string, string[]>();
  private readonly reasoning: string[] = [];
  private readonly modelioByHash = new Map<string, string>();
  private readonly modelioSeq = new Map<string, number>();
  private readonly pendingStepPatches = new Map<number, Array<(s: StepRecord) => void>>();
  private readonly sideEffects = new Map<string, SideEffect>();
  private readonly evalCandidates = new Map<number, EvalCandidate>();
  private readonly outcomes: OutcomeRecord[] = [];
  private readonly preferences = new Map<number, Record<string, unknown>>();
  private readonly replayPriors = new Map<number, StepRecord>();
  private readonly logs = new Map<string, LogFile>();
  private readonly signatures = new Map<string, string>();
  /** what was last streamed of each canonical step: close re-sends the ones that changed since */
  private readonly sentSteps = new Map<string, string>();
  private costs: Costs = {};
  private staged: Promise<StagedStore> | null = null;
  private readonly writes: Array<Promise<unknown>> = [];
  private interventionStop: AbortController | null = null;
  private intervention: Promise<void> | null = null;
  private manifest: Manifest | null = null;
  private closing: Promise<Manifest> | null = null;
  private orchestrator = false;
  private branch: BranchMode | null = null;

  constructor(opts: DebugSessionOptions) {
    if (!opts.clientName) throw new ValueError('clientName is required');
    if (!opts.outDir) throw new ValueError('outDir is required');
    const env = opts.env ?? process.env;
    this.runId = safeId('runId', opts.runId);
    this.clientName = opts.clientName;
    this.outDir = path.resolve(opts.outDir);
    this.debugSessionId = safeId('debugSessionId', opts.debugSessionId ?? newId('dbg_'));
    this.store = opts.store ?? new FileStore(this.outDir);
    this.redaction = opts.redactionPolicy ?? RedactionPolicy.default();
    this.captureLogprobs = opts.captureLogprobs ?? false;
    this.captureMode = resolveCaptureMode(opts.captureMode ?? null, env);
    this.log = opts.logger ?? defaultLogger;
    this.streamOpts = opts.stream ?? {};
    this.rulePacks = opts.rulePacks ?? ['builtin'];
    if (opts.taskSpec) this.checkOrThrow('task-spec', opts.taskSpec);
    if (opts.branchContext) this.checkBranchContext(opts.branchContext);
    this.session = {
      run_id: this.runId,
      debug_session_id: this.debugSessionId,
      client_name: this.clientName,
      client_version: opts.clientVersion ?? null,
      client_git_sha: opts.clientGitSha ?? null,
      status: 'running',
      capture_mode: this.captureMode,
      tags: { ...(opts.tags ?? {}) },
      started_at: opts.startedAt ?? nowIso(),
      ended_at: null,
      task_spec_id: opts.taskSpecId ?? opts.taskSpec?.task_spec_id ?? null,
      group_id: opts.groupId ?? null,
      redaction_policy: this.redaction.id,
      capture_logprobs: this.captureLogprobs,
    };
    if (opts.taskSpec) this.session.task_spec = structuredClone(opts.taskSpec);
    if (opts.branchContext) this.session.branch_context = structuredClone(opts.branchContext);
    const dsn = opts.dsn === null ? undefined : (opts.dsn ?? env.TRACE_DSN);
    this.streamer = null;
    if (dsn) {
      try {
        this.streamer = new Streamer({
          dsn,
          logger: this.log,
          clientId: this.debugSessionId,
          clientName: this.clientName,
          queueMax: this.streamOpts.queueMax,
          batchMax: this.streamOpts.batchMax,
          fetch: this.streamOpts.fetch,
        });
      } catch (err) {
        this.log.warn(`streaming is off: ${(err as Error).message}`);
      }
    }
    if (this.streamer) {
      this.post({ kind: 'manifest', method: 'POST', path: '/runs', key: 'manifest', body: () => this.manifest ?? this.buildManifest(null) });
      this.heartbeat();
      const every = this.streamOpts.heartbeatIntervalMs ?? 15_000;
      this.heartbeatTimer = setInterval(() => this.heartbeat(), every);
      this.heartbeatTimer.unref();
    }
  }

  // ---------------------------------------------------------------- properties

  get isStreaming(): boolean {
    return this.streamer !== null;
  }

  get isOrchestrator(): boolean {
    return this.orchestrator;
  }

  get branchMode(): BranchMode | null {
    return this.branch;
  }

  get isClosed(): boolean {
    return this.manifest !== null;
  }

  get currentCaptureMode(): CaptureMode {
    return this.captureMode;
  }

  /** True when the session's capture mode captures at least `mode` (adapters use it to decide what to take). */
  captures(mode: CaptureMode): boolean {
    return captures(this.captureMode, mode);
  }

  /** Live streaming counters (sent, dropped, failed, retried, batches), or null without a DSN. */
  get streamStats() {
    return this.streamer ? { ...this.streamer.stats, modelio_latched: this.streamer.modelioLatched, queue_depth: this.streamer.depth } : null;
  }

  private get runPath(): string {
    return `/runs/${encodeURIComponent(this.runId)}`;
  }

  // ---------------------------------------------------------------- internals

  private post(job: StreamJob): void {
    this.streamer?.enqueue(job);
  }

  private heartbeat(): void {
    this.post({
      kind: 'heartbeat',
      method: 'POST',
      path: '/heartbeat',
      key: 'heartbeat',
      body: () => ({
        client_id: this.debugSessionId,
        client_name: this.clientName,
        client_version: this.session.client_version ?? null,
        capture_mode: this.captureMode,
        run_id: this.runId,
        last_event: this.lastEvent,
      }),
    });
  }

  private checkOrThrow(kind: Parameters<typeof checkRecord>[0], value: unknown, root = ''): void {
    const msg = checkRecord(kind, value, root);
    if (msg) throw new ValueError(`invalid ${kind}: ${msg}`);
  }

  private checkBranchContext(bc: BranchContext): void {
    this.checkOrThrow('session', { run_id: 'x', debug_session_id: 'x', client_name: 'x', started_at: nowIso(), branch_context: bc });
  }

  private assertOpen(): void {
    if (this.manifest || this.closing) throw new Error('the session is closed');
  }

  private refuseOnOrchestrator(method: string): void {
    if (this.orchestrator) throw new RuntimeError(`${method} is not available on an orchestrator session`);
  }

  private step(stepIndex: number, method: string): StepRecord {
    const s = this.steps.get(stepIndex);
    if (!s) throw new ValueError(`${method}: no step ${stepIndex}`);
    return s;
  }

  private streamStep(s: StepRecord): void {
    const idx = s.step_index;
    const key = `step:${idx}:${s.step_id}`;
    this.post({
      kind: 'step',
      method: 'PUT',
      path: `${this.runPath}/steps/${idx}`,
      key,
      body: () => {
        const current = this.steps.get(idx) ?? s;
        this.sentSteps.set(key, bundleJson(current));
        return current;
      },
    });
  }

  private touched(s: StepRecord): void {
    this.lastEvent = `step:${s.step_index}`;
    this.streamStep(s);
  }

  private stagedStore(): Promise<StagedStore> {
    if (!this.staged) {
      this.staged = this.store.stage
        ? this.store.stage()
        : Promise.resolve({ store: this.store, commit: async () => undefined, discard: async () => undefined });
    }
    return this.staged;
  }

  /** Writes a file into the bundle being built; remembers its signature for the manifest. */
  private async putFile(relpath: string, data: string | Uint8Array): Promise<void> {
    const { store } = await this.stagedStore();
    this.signatures.set(relpath, sha256Hex(data));
    await writeBytes(store, relpath, data);
  }

  /** Background work close() waits for; a failure is logged (validate_bundle then names the missing file). */
  private track<T>(p: Promise<T>): Promise<T> {
    this.writes.push(p.catch((err: Error) => this.log.warn(`bundle write failed: ${err.message}`)));
    return p;
  }

  private patchStep(stepIndex: number, patch: (s: StepRecord) => void): void {
    const s = this.steps.get(stepIndex);
    if (s) {
      patch(s);
      this.touched(s);
      return;
    }
    const list = this.pendingStepPatches.get(stepIndex) ?? [];
    list.push(patch);
    this.pendingStepPatches.set(stepIndex, list);
  }

  private branchSlice(): StepRecord['branch_context'] | undefined {
    const bc = this.session.branch_context;
    if (!bc) return undefined;
    const slice: NonNullable<StepRecord['branch_context']> = { parent_run_id: bc.parent_run_id, branch_point_step_index: bc.branch_point_step_index, mutated_axis: bc.mutated_axis };
    if (bc.branch_id) slice.branch_id = bc.branch_id;
    return slice;
  }

  // ---------------------------------------------------------------- steps

  /**
   * Records a step. A new step_id under an index that already has a canonical
   * step is deprecated: it warns and is stored as an iteration of that step.
   */
  recordStep(input: StepInput): StepRecord {
    this.assertOpen();
    this.refuseOnOrchestrator('recordStep');
    if (!Number.isInteger(input.step_index) || input.step_index < 0) throw new ValueError('step_index must be an integer >= 0');
    const step: StepRecord = { ...structuredClone(input), step_id: input.step_id ?? newId('step_') } as StepRecord;
    const existing = this.steps.get(step.step_index);
    if (existing && existing.step_id !== step.step_id) {
      this.log.warn(`recordStep: a new step_id under existing step_index ${step.step_index} is deprecated; stored as an iteration (use recordStepIteration)`);
      return this.recordStepIteration(step.step_index, step);
    }
    step.capture_mode ??= this.captureMode;
    if (step.group_id === undefined && this.session.group_id) step.group_id = this.session.group_id;
    if (!step.branch_context && this.session.branch_context) step.branch_context = this.branchSlice();
    if (step.verdict && !step.verdict_source) step.verdict_source = 'native';
    let record = step;
    if (existing) {
      record = Object.assign(existing, step);
    } else {
      for (const patch of this.pendingStepPatches.get(step.step_index) ?? []) patch(step);
      this.pendingStepPatches.delete(step.step_index);
    }
    this.checkOrThrow('step', record);
    this.steps.set(record.step_index, record);
    this.touched(record);
    return record;
  }

  /** Adds an iteration under an existing canonical step (by index or step_id) and bumps its step_iterations. */
  recordStepIteration(stepIdOrIndex: string | number, iteration: Partial<StepRecord>): StepRecord {
    this.assertOpen();
    this.refuseOnOrchestrator('recordStepIteration');
    const canonical = typeof stepIdOrIndex === 'number' ? this.steps.get(stepIdOrIndex) : [...this.steps.values()].find((s) => s.step_id === stepIdOrIndex);
    if (!canonical) throw new ValueError(`recordStepIteration: no canonical step ${JSON.stringify(stepIdOrIndex)}`);
    const list = this.iterations.get(canonical.step_index) ?? [canonical];
    const it = { ...structuredClone(iteration), step_index: canonical.step_index, step_id: iteration.step_id ?? newId('step_') } as StepRecord;
    if (list.some((s) => s.step_id === it.step_id)) throw new ValueError(`recordStepIteration: step_id ${it.step_id} is already used by step ${canonical.step_index}`);
    it.capture_mode ??= this.captureMode;
    if (!it.branch_context && this.session.branch_context) it.branch_context = this.branchSlice();
    this.checkOrThrow('step', it);
    list.push(it);
    this.iterations.set(canonical.step_index, list);
    canonical.step_iterations = list.length;
    // the server keeps iterations under steps/NNNN/<short_id>.json: re-emit the iteration, then the canonical step
    this.post({ kind: 'step', method: 'PUT', path: `${this.runPath}/steps/${it.step_index}`, key: `step:${it.step_index}:${it.step_id}`, body: it });
    this.touched(canonical);
    return it;
  }

  recordEvent(event: Partial<DecisionEvent> & Pick<DecisionEvent, 'layer' | 'kind'>): DecisionEvent {
    this.assertOpen();
    const e = this.redaction.apply({ event_id: newId('evt_'), ts: nowIso(), step_index: null, ...structuredClone(event) }) as DecisionEvent;
    this.checkOrThrow('decision-event', e);
    const file = e.step_index === null || e.step_index === undefined ? 'run' : pad4(e.step_index);
    const lines = this.events.get(file) ?? [];
    lines.push(jsonLine(e));
    this.events.set(file, lines);
    this.lastEvent = `event:${e.layer}:${e.kind}`;
    const body: Record<string, unknown> = { events: [e] };
    if (typeof e.step_index === 'number') body.step_index = e.step_index;
    this.post({ kind: 'events', method: 'POST', path: `${this.runPath}/events`, body });
    return e;
  }

  /** Stores a screenshot (PNG bytes) as screenshots/<NNNN>_<kind>.png and returns that path. */
  async attachObservation(stepIndex: number, kind: 'pre' | 'post' | 'target' | 'diff', png: Uint8Array): Promise<string> {
    this.assertOpen();
    this.refuseOnOrchestrator('attachObservation');
    if (!['pre', 'post', 'target', 'diff'].includes(kind)) throw new ValueError(`attachObservation: kind must be pre, post, target or diff, got ${JSON.stringify(kind)}`);
    if (!Number.isInteger(stepIndex) || stepIndex < 0) throw new ValueError('attachObservation: step_index must be an integer >= 0');
    if (!isPng(png)) throw new ValueError('attachObservation: the bytes are not a PNG image');
    const rel = `screenshots/${pad4(stepIndex)}_${kind}.png`;
    const bytes = Buffer.from(png);
    // the file write and the perceptual hash run in the background (close waits for them)
    this.track(this.putFile(rel, bytes)).catch(() => undefined);
    this.patchStep(stepIndex, (s) => {
      s.observation = { ...(s.observation ?? {}), [kind]: rel };
    });
    if (kind === 'post') {
      // observation.hashes.phash_64 describes the state after the step (decoding costs a few ms, so only the post image)
      this.track(
        phash64(bytes).then((hash) =>
          this.patchStep(stepIndex, (s) => {
            s.observation = { ...(s.observation ?? {}), hashes: { ...(s.observation?.hashes ?? {}), phash_64: hash } };
          }),
        ),
      ).catch(() => undefined);
    }
    this.post({ kind: 'screenshot', method: 'POST', path: `${this.runPath}/screenshots/${stepIndex}/${kind}`, image: bytes });
    return rel;
  }

  // ---------------------------------------------------------------- session metadata

  setStatus(status: RunStatus): void {
    this.checkOrThrow('session', { ...this.session, status });
    this.status = status;
    this.session.status = status;
  }

  addTag(key: string, value: string): void {
    this.session.tags = { ...(this.session.tags ?? {}), [key]: String(value) };
  }

  setLiveEndpoints(endpoints: { status_url?: string | null; video_url?: string | null; reasoning_url?: string | null }): void {
    this.session.live_endpoints = { status_url: endpoints.status_url ?? null, video_url: endpoints.video_url ?? null, reasoning_url: endpoints.reasoning_url ?? null };
  }

  /** Later steps are stamped with this mode unless they carry their own. */
  setCaptureMode(mode: CaptureMode | string): void {
    this.captureMode = resolveCaptureMode(mode);
    this.session.capture_mode = this.captureMode;
  }

  /**
   * Appends to logs/<name>.log (or logs/step-<idx>.log) and posts it live.
   * Each log file is bounded at 1 MB: an append that would pass it is dropped.
   */
  appendLog(text: string, opts: { stepIndex?: number | null; name?: string } = {}): void {
    const name = opts.stepIndex !== undefined && opts.stepIndex !== null ? `step-${opts.stepIndex}` : (opts.name ?? 'run');
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(name) || name.startsWith('.')) throw new ValueError(`appendLog: invalid log name ${JSON.stringify(name)}`);
    const file = this.logs.get(name) ?? { text: '', bytes: 0, truncated: false };
    const size = Buffer.byteLength(text);
    if (file.bytes + size > LOG_FILE_LIMIT) {
      if (!file.truncated) this.log.warn(`log ${name} reached ${LOG_FILE_LIMIT} bytes; further lines are dropped`);
      file.truncated = true;
    } else {
      file.text += text;
      file.bytes += size;
    }
    this.logs.set(name, file);
    const body: Record<string, unknown> = { text };
    if (opts.stepIndex !== undefined && opts.stepIndex !== null) body.step_index = opts.stepIndex;
    else body.name = name;
    this.post({ kind: 'logs', method: 'POST', path: `${this.runPath}/logs`, body });
  }

  // ---------------------------------------------------------------- verdicts, costs, scores

  /**
   * Replaces the step's verdict with a verifier's; composes the reason from
   * check, expected and actual when none is given, and adds an implicit rule
   * judge decision (judge_id attach_verifier).
   */
  attachVerifier(
    stepIndex: number,
    v: { status: Verdict['status']; reason?: string | null; check?: string; expected?: unknown; actual?: unknown; evidenceRefs?: string[] },
  ): Verdict {
    const s = this.step(stepIndex, 'attachVerifier');
    const reason = v.reason ?? (v.check !== undefined || v.expected !== undefined || v.actual !== undefined ? `${v.check ?? 'check'}: expected ${JSON.stringify(v.expected ?? null)}, actual ${JSON.stringify(v.actual ?? null)}` : null);
    const verdict: Verdict = { status: v.status, reason, comparator: 'verifier' };
    if (v.check !== undefined) verdict.check = v.check;
    if (v.expected !== undefined) verdict.expected = this.redaction.apply(v.expected, 'expected');
    if (v.actual !== undefined) verdict.actual = this.redaction.apply(v.actual, 'actual');
    if (v.evidenceRefs) verdict.evidence_refs = [...v.evidenceRefs];
    this.checkOrThrow('verdict', verdict);
    s.verdict = verdict;
    s.verdict_source = 'rule:attach_verifier';
    s.judge_decisions = [
      ...(s.judge_decisions ?? []),
      { judge_id: 'attach_verifier', judge_type: 'rule', verdict: structuredClone(verdict), confidence: null, evidence_refs: [...(v.evidenceRefs ?? [])], judged_at: nowIso() },
    ];
    this.touched(s);
    return verdict;
  }

  private mergeCosts<T extends Costs>(target: T, patch: Partial<Costs>, keys: readonly string[], where: string): boolean {
    let changed = false;
    for (const [k, v] of Object.entries(patch)) {
      if (v === undefined || v === null) continue;
      if (!keys.includes(k)) throw new ValueError(`${where}: unknown cost field ${k}`);
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || (INT_COST_KEYS.has(k) && !Number.isInteger(v))) throw new ValueError(`${where}: ${k} must be a ${INT_COST_KEYS.has(k) ? 'non-negative integer' : 'non-negative number'}`);
      (target as Record<string, number>)[k] = v;
      changed = true;
    }
    return changed;
  }

  /** Merges into the run-level costs; with streaming PUTs the cumulative object whenever something was set. */
  setCosts(patch: Partial<Costs>): Costs {
    if (this.mergeCosts(this.costs, patch, COST_KEYS, 'setCosts')) {
      this.post({ kind: 'costs', method: 'PUT', path: `${this.runPath}/costs`, key: 'costs', body: () => ({ ...this.costs }) });
    }
    return { ...this.costs };
  }

  setStepCosts(stepIndex: number, patch: Partial<StepCosts>): StepCosts {
    const s = this.step(stepIndex, 'setStepCosts');
    const costs = { ...(s.costs ?? {}) };
    if (this.mergeCosts(costs, patch, STEP_COST_KEYS, 'setStepCosts')) {
      s.costs = costs;
      this.touched(s);
    }
    return { ...costs };
  }

  /** Merges a score into the step's verdict; score and uncertainty are clamped to 0..1. */
  setScore(
    stepIndex: number,
    score: number,
    opts: { comparator?: Verdict['comparator']; components?: Record<string, number>; shouldStop?: boolean; uncertainty?: number } = {},
  ): Verdict {
    const s = this.step(stepIndex, 'setScore');
    if (opts.comparator !== undefined && !(COMPARATORS as readonly string[]).includes(opts.comparator)) {
      throw new ValueError(`setScore: unknown comparator ${JSON.stringify(opts.comparator)}; one of ${COMPARATORS.join(', ')}`);
    }
    const verdict: Verdict = { ...(s.verdict ?? { status: inferredVerdictStatus(s) }) };
    verdict.score = clamp01(score);
    if (opts.comparator) verdict.comparator = opts.comparator;
    if (opts.components) {
      for (const [k, v] of Object.entries(opts.components)) if (typeof v !== 'number' || !Number.isFinite(v)) throw new ValueError(`setScore: component ${k} must be a number`);
      verdict.score_components = { ...(verdict.score_components ?? {}), ...opts.components };
    }
    if (opts.shouldStop !== undefined) verdict.should_stop = opts.shouldStop;
    if (opts.uncertainty !== undefined) verdict.uncertainty = clamp01(opts.uncertainty);
    s.verdict = verdict;
    s.verdict_source ??= 'native';
    this.touched(s);
    return verdict;
  }

  recordJudgeDecision(
    stepIndex: number,
    d: { judgeId: string; judgeType: JudgeDecision['judge_type']; verdict: Verdict; confidence?: number | null; evidenceRefs?: string[]; judgedAt?: string; promote?: boolean },
  ): JudgeDecision {
    const s = this.step(stepIndex, 'recordJudgeDecision');
    const decision: JudgeDecision = {
      judge_id: d.judgeId,
      judge_type: d.judgeType,
      verdict: structuredClone(d.verdict),
      confidence: d.confidence ?? null,
      evidence_refs: [...(d.evidenceRefs ?? [])],
      judged_at: d.judgedAt ?? nowIso(),
    };
    this.checkOrThrow('judge-decision', decision);
    s.judge_decisions = [...(s.judge_decisions ?? []), decision];
    if (d.promote ?? true) {
      s.verdict = structuredClone(decision.verdict);
      s.verdict_source = `${decision.judge_type}:${decision.judge_id}`;
    }
    this.touched(s);
    this.post({ kind: 'judge_decision', method: 'POST', path: `${this.runPath}/steps/${stepIndex}/judge-decisions`, body: decision });
    return decision;
  }

  /** Tags a step for evaluation; idempotent per step (the first mark stays). */
  markForEval(stepIndex: number, opts: { reason: string; candidateClusterId?: string | null }): EvalCandidate {
    const prior = this.evalCandidates.get(stepIndex);
    if (prior) return prior;
    const c: EvalCandidate = { step_index: stepIndex, reason: opts.reason, candidate_cluster_id: opts.candidateClusterId ?? null, marked_at: nowIso() };
    this.checkOrThrow('eval-candidate', c);
    this.evalCandidates.set(stepIndex, c);
    this.post({ kind: 'eval_candidate', method: 'POST', path: `${this.runPath}/eval-candidates`, key: `eval:${stepIndex}`, body: c });
    return c;
  }

  /**
   * Writes an outcome (outcomes.json). Session scope rolls up the step costs
   * under the session-level costs (set_costs wins ties) unless a cost summary is given.
   */
  finalizeOutcome(opts: { scope?: 'session' | 'step'; stepIndex?: number | null; verdict: Verdict; taskClass?: string | null; costSummary?: Costs }): OutcomeRecord {
    const scope = opts.scope ?? 'session';
    let cost: Costs;
    if (scope === 'step') {
      if (opts.stepIndex === undefined || opts.stepIndex === null) throw new ValueError('finalizeOutcome: scope step needs step_index');
      cost = opts.costSummary ?? { ...(this.step(opts.stepIndex, 'finalizeOutcome').costs ?? {}) };
    } else {
      cost = opts.costSummary ?? rollupCosts(this.steps.values(), this.costs);
    }
    const o: OutcomeRecord = {
      scope,
      step_index: scope === 'step' ? opts.stepIndex! : null,
      verdict: structuredClone(opts.verdict),
      task_class: opts.taskClass ?? this.session.task_spec?.task_class ?? null,
      cost_summary: cost,
      recorded_at: nowIso(),
    };
    this.checkOrThrow('outcome', o);
    this.outcomes.push(o);
    this.post({ kind: 'outcome', method: 'POST', path: `${this.runPath}/outcomes`, body: o });
    return o;
  }

  /** The cost summary of the last passed session outcome, or null. */
  successfulTaskCostSummary(): Costs | null {
    for (let i = this.outcomes.length - 1; i >= 0; i--) {
      const o = this.outcomes[i]!;
      if (o.scope === 'session' && o.verdict.status === 'passed') return { ...(o.cost_summary ?? {}) };
    }
    return null;
  }

  recordReasoning(stepIndex: number | null, text: string, opts: { tokens?: number | null; format?: ReasoningRecord['format']; model?: string | null; ts?: string } = {}): ReasoningRecord {
    const r: ReasoningRecord = {
      step_index: stepIndex,
      text: this.redaction.applyReasoning(text),
      tokens: opts.tokens ?? null,
      format: opts.format ?? 'adapter_inferred',
      model: opts.model ?? null,
      ts: opts.ts ?? nowIso(),
    };
    this.checkOrThrow('reasoning', r);
    this.reasoning.push(jsonLine(r));
    this.post({ kind: 'reasoning', method: 'POST', path: `${this.runPath}/reasoning`, body: r });
    return r;
  }

  // ---------------------------------------------------------------- model io

  /**
   * Validates, redacts and stores one model call; idempotent on prompt_hash
   * (a second record with the same hash returns the first path). Stamps the
   * model and prompt_hash into the step's captured_versions.
   */
  async recordModelio(record: ModelIoRecord | Record<string, unknown>, opts: { stepIndex?: number | null; layer?: string; validate?: boolean } = {}): Promise<string> {
    this.assertOpen();
    const rec = structuredClone(record) as ModelIoRecord;
    const layer = opts.layer ?? rec.layer;
    if (typeof layer !== 'string' || !/^[a-z][a-z0-9_]{0,31}$/.test(layer)) throw new ValueError('recordModelio: layer is required, 1-32 of a-z 0-9 _ starting with a letter (it names modelio/<step>-<layer>-<seq>.json), whether or not the record is validated');
    rec.layer = layer;
    const stepIndex = opts.stepIndex ?? (typeof rec.step_index === 'number' ? rec.step_index : null);
    rec.step_index = stepIndex;
    rec.response ??= {};
    if (this.captureLogprobs && rec.response.logprobs === undefined) rec.response.logprobs = [];
    rec.prompt_hash ??= sha256Hex(canonicalJson(rec.request ?? null));
    const existing = this.modelioByHash.get(rec.prompt_hash);
    if (existing) return existing;
    const redacted = this.redaction.apply(rec);
    redacted.prompt_hash = rec.prompt_hash;
    redacted.redaction_applied = this.redaction.id;
    redacted.recorded_at ??= nowIso();
    if (opts.validate ?? true) this.checkOrThrow('modelio', redacted);
    const stepKey = stepIndex === null ? 'run' : pad4(stepIndex);
    const seqKey = `${stepKey}-${layer}`;
    const seq = this.modelioSeq.get(seqKey) ?? 0;
    this.modelioSeq.set(seqKey, seq + 1);
    const name = `${stepKey}-${layer}-${seq}.json`;
    const rel = `modelio/${name}`;
    this.modelioByHash.set(rec.prompt_hash, rel);
    this.track(this.putFile(rel, bundleJson(redacted))).catch(() => undefined);
    if (stepIndex !== null) {
      const model = typeof redacted.request?.model === 'string' ? redacted.request.model : undefined;
      this.patchStep(stepIndex, (s) => {
        s.captured_versions = { ...(s.captured_versions ?? {}), ...(model ? { model } : {}), prompt_hash: rec.prompt_hash! };
        s.modelio = [...(s.modelio ?? []), rel];
      });
    }
    this.post({ kind: 'modelio', method: 'POST', path: `${this.runPath}/modelio/${name}`, body: redacted });
    return rel;
  }

  setStepVersions(stepIndex: number, versions: Partial<CapturedVersions>): CapturedVersions {
    const s = this.step(stepIndex, 'setStepVersions');
    const merged = { ...(s.captured_versions ?? {}), ...versions };
    this.checkOrThrow('step', { ...s, captured_versions: merged });
    s.captured_versions = merged;
    this.touched(s);
    return merged;
  }

  /** Stores the structural fingerprint the caller computed (the SDK never derives dom_hash). */
  attachEnvFingerprint(stepIndex: number, fp: EnvFingerprint): EnvFingerprint {
    const s = this.step(stepIndex, 'attachEnvFingerprint');
    this.checkOrThrow('step', { ...s, env_fingerprint: fp });
    s.env_fingerprint = structuredClone(fp);
    this.touched(s);
    return s.env_fingerprint;
  }

  // ---------------------------------------------------------------- task spec, groups, subgoals

  setTaskSpec(spec: TaskSpec): void {
    this.checkOrThrow('task-spec', spec);
    this.session.task_spec = structuredClone(spec);
    this.session.task_spec_id = spec.task_spec_id;
  }

  setTaskSpecId(id: string | null): void {
    this.session.task_spec_id = id;
  }

  /** Late group id: stamped on every step that has none (now and at close). */
  setGroupId(groupId: string | null): void {
    this.session.group_id = groupId;
    if (groupId) for (const s of this.steps.values()) if (s.group_id === undefined || s.group_id === null) s.group_id = groupId;
  }

  recordSubgoalCompletion(stepIndex: number, subgoalId: string, completion: number): SubgoalCompletion {
    const s = this.step(stepIndex, 'recordSubgoalCompletion');
    const known = this.session.task_spec?.subgoals?.map((g) => g.subgoal_id);
    if (!known?.includes(subgoalId)) this.log.warn(`recordSubgoalCompletion: subgoal ${JSON.stringify(subgoalId)} is not in task_spec.subgoals`);
    const c = clamp01(completion);
    let first: number | null = null;
    for (const other of [...this.steps.values()].sort((a, b) => a.step_index - b.step_index)) {
      const prior = other.subgoals_completed?.find((x) => x.subgoal_id === subgoalId && typeof x.first_completed_at_step === 'number');
      if (prior) {
        first = prior.first_completed_at_step!;
        break;
      }
    }
    if (first === null && c >= 1) first = stepIndex;
    const rec: SubgoalCompletion = { subgoal_id: subgoalId, completion: c, first_completed_at_step: first };
    s.subgoals_completed = [...(s.subgoals_completed ?? []).filter((x) => x.subgoal_id !== subgoalId), rec];
    this.touched(s);
    return rec;
  }

  setLoopDetected(stepIndex: number, value = true): void {
    const s = this.step(stepIndex, 'setLoopDetected');
    s.loop_detected = value;
    this.touched(s);
  }

  /** A pairwise preference about a step (preferences/<NNNN>.json); our addition for the preferences route. */
  recordPreference(stepIndex: number, preference: Record<string, unknown>): void {
    this.preferences.set(stepIndex, { step_index: stepIndex, ...this.redaction.apply(structuredClone(preference)), recorded_at: nowIso() });
    this.post({ kind: 'preference', method: 'PUT', path: `${this.runPath}/preferences/${stepIndex}`, key: `pref:${stepIndex}`, body: () => this.preferences.get(stepIndex) });
  }

  // ---------------------------------------------------------------- side effects

  private putSideEffect(se: SideEffect): void {
    this.post({ kind: 'side_effect', method: 'PUT', path: `${this.runPath}/side-effects/${encodeURIComponent(se.side_effect_id)}`, key: `se:${se.side_effect_id}`, body: () => this.sideEffects.get(se.side_effect_id) });
  }

  declareSideEffect(d: {
    stepIndex: number;
    resource: string;
    action: string;
    idempotencyKey?: string | null;
    reversibility?: SideEffect['reversibility'];
    compensationHandle?: string | null;
    provenance?: SideEffect['provenance'];
    sideEffectId?: string;
  }): string {
    const se: SideEffect = {
      side_effect_id: d.sideEffectId ?? newId('se_'),
      step_index: d.stepIndex,
      resource: d.resource,
      action: d.action,
      idempotency_key: d.idempotencyKey ?? null,
      reversibility: d.reversibility ?? 'irreversible',
      compensation_handle: d.compensationHandle ?? null,
      provenance: d.provenance ?? 'sdk_declared',
      state: 'declared',
      declared_at: nowIso(),
    };
    safeId('declareSideEffect: side_effect_id', se.side_effect_id);
    if (this.sideEffects.has(se.side_effect_id)) throw new ValueError(`declareSideEffect: ${se.side_effect_id} is already declared`);
    this.checkOrThrow('side-effect', se);
    this.sideEffects.set(se.side_effect_id, se);
    this.putSideEffect(se);
    return se.side_effect_id;
  }

  private declared(id: string, method: string): SideEffect {
    const se = this.sideEffects.get(id);
    if (!se) throw new ValueError(`${method}: unknown side effect ${id}`);
    if (se.state !== 'declared') throw new ValueError(`${method}: side effect ${id} is already ${se.state}`);
    return se;
  }

  commitSideEffect(id: string, observedResult?: unknown): SideEffect {
    const se = this.declared(id, 'commitSideEffect');
    se.state = 'committed';
    se.committed_at = nowIso();
    if (observedResult !== undefined) se.observed_result = this.redaction.apply(structuredClone(observedResult), 'observed_result');
    this.putSideEffect(se);
    return se;
  }

  markSideEffectAborted(id: string, reason: string): SideEffect {
    const se = this.declared(id, 'markSideEffectAborted');
    se.state = 'aborted';
    se.aborted_at = nowIso();
    se.reason = reason;
    this.putSideEffect(se);
    return se;
  }

  /** Aborts every declared (not yet committed) side effect; returns their ids. */
  abortPendingSideEffects(reason: string): string[] {
    const ids: string[] = [];
    for (const se of this.sideEffects.values()) {
      if (se.state !== 'declared') continue;
      this.markSideEffectAborted(se.side_effect_id, reason);
      ids.push(se.side_effect_id);
    }
    return ids;
  }

  sideEffect(id: string): SideEffect | undefined {
    const se = this.sideEffects.get(id);
    return se ? structuredClone(se) : undefined;
  }

  // ---------------------------------------------------------------- intervention

  /**
   * Starts the command long-poll (GET /runs/{id}/commands) and dispatches each
   * new command to the adapter; returns null without streaming. Commands are
   * deduped on command_id and the poll resumes from its cursor; each is logged
   * as a decision event. kill aborts pending side effects before on_kill.
   */
  bindIntervention(adapter: Adapter, pollTimeout = 25.0): { stop(): Promise<void> } | null {
    if (!this.streamer) return null;
    if (this.intervention) throw new Error('bindIntervention: already bound');
    const stop = new AbortController();
    this.interventionStop = stop;
    const streamer = this.streamer;
    const seen = new Set<string>();
    let cursor = 0;
    const loop = async () => {
      while (!stop.signal.aborted) {
        try {
          const res = await streamer.request('GET', `${this.runPath}/commands?cursor=${cursor}&timeout=${Math.max(0, Math.min(60, pollTimeout))}`, stop.signal);
          const text = await res.text();
          if (res.status !== 200) {
            this.log.debug('command poll refused', { status: res.status, detail: text.slice(0, 200) });
            await pause(1000, stop.signal);
            continue;
          }
          const body = JSON.parse(text) as { commands?: Array<Record<string, unknown>>; cursor?: number };
          for (const c of body.commands ?? []) {
            const id = String(c.command_id ?? '');
            if (!id || seen.has(id)) continue;
            seen.add(id);
            await this.dispatchCommand(adapter, c);
          }
          if (typeof body.cursor === 'number' && body.cursor > cursor) cursor = body.cursor;
        } catch (err) {
          if (stop.signal.aborted) break;
          this.log.debug('command poll failed', { error: (err as Error).message });
          await pause(1000, stop.signal);
        }
      }
    };
    this.intervention = loop();
    return {
      stop: async () => {
        stop.abort();
        await this.intervention;
      },
    };
  }

  private async dispatchCommand(adapter: Adapter, c: Record<string, unknown>): Promise<void> {
    const type = String(c.type ?? '');
    const payload = (c.payload && typeof c.payload === 'object' ? c.payload : {}) as Record<string, unknown>;
    if (!this.manifest && !this.closing) {
      this.recordEvent({
        layer: 'intervention',
        kind: 'command',
        step_index: null,
        command_id: String(c.command_id),
        operator_id: typeof c.operator_id === 'string' ? c.operator_id : null,
        summary: type,
        payload: { type, ...payload },
      });
    }
    try {
      switch (type) {
        case 'pause':
          await adapter.onPause?.();
          break;
        case 'resume':
          await adapter.onResume?.();
          break;
        case 'kill':
          this.abortPendingSideEffects('killed by operator');
          await adapter.onKill?.();
          break;
        case 'inject_hint':
          await adapter.onInjectHint?.(String(payload.text ?? ''));
          break;
        case 'override_action':
          await adapter.onActionOverride?.((payload.coords ?? {}) as ActionOverrideCoords, 'human_override');
          break;
        default:
          this.log.debug('unknown intervention command', { type });
      }
    } catch (err) {
      this.log.warn(`intervention hook for ${type} failed: ${(err as Error).message}`);
    }
  }

  // ---------------------------------------------------------------- close

  private buildManifest(trajectory: string | null): Manifest {
    const m: Manifest = {
      schema_version: traceSchemaVersions().manifest,
      bundle_format: 'runplane-trace-bundle/1',
      run_id: this.runId,
      debug_session_id: this.debugSessionId,
      client_name: this.clientName,
      client_version: this.session.client_version ?? null,
      client_git_sha: this.session.client_git_sha ?? null,
      sdk_version: SDK_VERSION,
      status: this.status,
      started_at: this.session.started_at,
      ended_at: this.session.ended_at ?? null,
      capture_mode: this.captureMode,
      tags: { ...(this.session.tags ?? {}) },
      step_count: this.steps.size,
      costs: rollupCosts(this.steps.values(), this.costs),
      trajectory_fingerprint: trajectory,
      schema_versions: traceSchemaVersions(),
      redaction_policy: this.redaction.id,
      group_id: this.session.group_id ?? null,
      task_spec_id: this.session.task_spec_id ?? null,
    };
    if (this.session.branch_context) m.branch_context = structuredClone(this.session.branch_context);
    if (this.orchestrator) m.session_type = 'orchestrator';
    return m;
  }

  /** The trace document as it stands (trace.json). */
  traceDocument(): TraceDocument {
    const steps = [...this.steps.values()].sort((a, b) => a.step_index - b.step_index);
    return {
      schema_version: traceSchemaVersions().trace,
      session: { ...structuredClone(this.session), schema_version: traceSchemaVersions().session, status: this.status, capture_mode: this.captureMode, costs: rollupCosts(steps, this.costs) },
      steps,
    };
  }

  /** Writes the bundle (atomically on the file store) and returns the manifest. Idempotent. */
  close(status?: RunStatus | null): Promise<Manifest> {
    if (this.manifest) return Promise.resolve(this.manifest);
    this.closing ??= this.doClose(status ?? null);
    return this.closing;
  }

  private async doClose(status: RunStatus | null): Promise<Manifest> {
    if (status) this.setStatus(status);
    else if (this.status === 'running') this.setStatus('passed');
    this.session.ended_at = nowIso();
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.interventionStop?.abort();
    await this.intervention?.catch(() => undefined);
    // steps whose patches never met a record_step are dropped with a warning
    for (const idx of this.pendingStepPatches.keys()) this.log.warn(`step ${idx} got observations or model-io but was never recorded`);
    for (const s of this.steps.values()) {
      if (!s.verdict && s.status && s.status !== 'pending' && s.status !== 'running') {
        s.verdict = { status: inferredVerdictStatus(s) };
        s.verdict_source = 'inferred';
      }
      if ((s.group_id === undefined || s.group_id === null) && this.session.group_id) s.group_id = this.session.group_id;
      if (this.streamer && this.sentSteps.get(`step:${s.step_index}:${s.step_id}`) !== bundleJson(s)) this.streamStep(s);
    }
    while (this.writes.length) await Promise.all(this.writes.splice(0));
    const staged = await this.stagedStore();
    try {
      const trace = this.traceDocument();
      const files: Array<[string, string | Uint8Array]> = [];
      for (const s of trace.steps) {
        files.push([`steps/${pad4(s.step_index)}.json`, bundleJson(s)]);
        for (const it of this.iterations.get(s.step_index) ?? []) files.push([`steps/${pad4(s.step_index)}/${shortId(it.step_id)}.json`, bundleJson(it)]);
      }
      for (const [file, lines] of this.events) files.push([`events/${file}.jsonl`, lines.join('')]);
      if (this.reasoning.length) files.push(['events/reasoning.jsonl', this.reasoning.join('')]);
      for (const se of this.sideEffects.values()) files.push([`side_effects/${pad4(se.step_index)}-${se.side_effect_id}.json`, bundleJson(se)]);
      files.push(['eval_candidates.json', bundleJson([...this.evalCandidates.values()].sort((a, b) => a.step_index - b.step_index))]);
      files.push(['outcomes.json', bundleJson(this.outcomes)]);
      for (const [idx, p] of this.preferences) files.push([`preferences/${pad4(idx)}.json`, bundleJson(p)]);
      for (const [idx, p] of this.replayPriors) files.push([`replay/${pad4(idx)}.prior.json`, bundleJson(p)]);
      for (const [name, log] of this.logs) files.push([`logs/${name}.log`, log.text]);
      const engine = await RulesEngine.fromPacks(this.rulePacks).catch((err: Error) => {
        this.log.warn(`rule packs failed to load (${err.message}); using the built-in rules`);
        return new RulesEngine();
      });
      const findings = await engine.evaluate(new BundleContext(trace, null, null));
      const findingsText = bundleJson(findings);
      files.push(['diagnostics/findings.json', findingsText]);
      for (const f of TRACE_SCHEMA_FILES) files.push([`schema/${f}`, traceSchemaBytes(f)]);
      const traceText = bundleJson(trace);
      files.push(['trace.json', traceText]);
      for (const [rel, data] of files) await this.putFile(rel, data);
      const manifest = this.buildManifest(trajectoryFingerprint(trace.steps));
      manifest.paths = [...this.signatures.keys()].sort();
      manifest.signatures = Object.fromEntries(manifest.paths.map((p) => [p, this.signatures.get(p)!]));
      await writeBytes(staged.store, 'manifest.json', bundleJson(manifest));
      await staged.commit();
      this.manifest = manifest;
      if (this.streamer) {
        this.post({ kind: 'trace', method: 'PUT', path: `${this.runPath}/trace`, key: 'trace', body: trace });
        this.post({ kind: 'findings', method: 'PUT', path: `${this.runPath}/findings`, key: 'findings', body: findings });
        for (const [name, log] of this.logs) if (log.truncated) this.log.debug(`log ${name} was truncated locally`);
        this.post({ kind: 'manifest', method: 'POST', path: '/runs', key: 'manifest', body: manifest });
        await this.streamer.close(this.streamOpts.flushTimeoutMs ?? 5000);
      }
      return manifest;
    } catch (err) {
      await staged.discard().catch(() => undefined);
      await this.streamer?.close(0);
      throw err;
    }
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
    const mode: BranchMode = opts.mode === undefined || opts.mode === 'auto' ? (opts.mutatedAxis === 'action' ? 'sandbox' : 'replay') : opts.mode;
    if (mode === 'replay' && opts.mutatedAxis === 'action') throw new ValueError('branchFrom: replay mode is refused for an action mutation (use sandbox)');
    if (mode === 'replay' && !opts.parentBundle) throw new ValueError('branchFrom: replay mode needs parentBundle');
    const id = `${opts.parentRunId}:branch:${newId('', 8)}`;
    const branchContext: BranchContext = {
      parent_run_id: opts.parentRunId,
      branch_point_step_index: opts.branchPointStepIndex,
      mutated_axis: opts.mutatedAxis,
      mutation: structuredClone(opts.mutation ?? {}),
      branch_id: opts.branchId ?? id,
      branch_mode: mode,
    };
    const session = new DebugSession({ ...opts, runId: opts.runId ?? id, branchContext });
    session.branch = mode;
    if (mode === 'replay') {
      const parent = typeof opts.parentBundle === 'string' ? new FileStore(opts.parentBundle) : opts.parentBundle!;
      const files = await parent.list();
      for (const rel of files) {
        const m = /^steps\/(\d{4})\.json$/.exec(rel);
        if (!m || Number(m[1]) >= opts.branchPointStepIndex) continue;
        const prior = JSON.parse(await parent.readText(rel)) as StepRecord;
        session.replayPriors.set(prior.step_index, structuredClone(prior));
        const copy: StepRecord = { ...prior, branch_context: session.branchSlice() };
        if (copy.grounding) copy.grounding = { ...copy.grounding };
        session.steps.set(copy.step_index, copy);
        session.streamStep(copy);
      }
      for (const rel of files) {
        const m = /^screenshots\/(\d{4})_(pre|post|target|diff)\.png$/.exec(rel);
        if (!m || Number(m[1]) >= opts.branchPointStepIndex) continue;
        const bytes = await parent.readBytes(rel);
        await session.putFile(rel, bytes);
        session.post({ kind: 'screenshot', method: 'POST', path: `${session.runPath}/screenshots/${Number(m[1])}/${m[2]}`, image: bytes });
      }
    }
    return session;
  }

  /** A parent-only session (session_type orchestrator): it records events, costs and outcomes, never steps. */
  static openOrchestrator(opts: OrchestratorOptions): DebugSession {
    const tags: Record<string, string> = { ...(opts.tags ?? {}), session_type: 'orchestrator' };
    if (opts.sessionName) tags.session_name = opts.sessionName;
    if (opts.tenantId) tags.tenant_id = opts.tenantId;
    const session = new DebugSession({ ...opts, tags });
    session.orchestrator = true;
    return session;
  }
}

function inferredVerdictStatus(s: StepRecord): Verdict['status'] {
  switch (s.status) {
    case 'passed':
      return 'passed';
    case 'failed':
    case 'halted':
      return 'failed';
    case 'skipped':
      return 'skipped';
    default:
      return 'uncertain';
  }
}

const pause = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    }, { once: true });
  });

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
