// What one session has recorded so far, and the few moves every recorder
// shares: stream a record, write a bundle file, find or patch a step. The
// DebugSession owns one core and hands it to the modules that record each
// kind of thing, so the state has one home and each module states its needs.
import type {
  CaptureMode,
  Costs,
  EvalCandidate,
  Manifest,
  OutcomeRecord,
  RunStatus,
  SessionRecord,
  SideEffect,
  StepRecord,
} from '../schemas/trace/types.gen.ts';
import { bundleJson, checkRecord } from '../schemas/trace/index.ts';
import { resolveCaptureMode } from './capture.ts';
import type { BranchMode, DebugSessionOptions, StreamOptions } from './session-options.ts';
import { type StagedStore, type Store, writeBytes } from './store.ts';
import type { RedactionPolicy } from './redaction.ts';
import { Streamer, type StreamJob } from './stream.ts';
import { RuntimeError, ValueError, defaultLogger, nowIso, sha256Hex, type SdkLogger } from './util.ts';

export interface LogFile {
  text: string;
  bytes: number;
  truncated: boolean;
}

/** Who a session is and where it writes: fixed at construction, public on DebugSession. */
export interface SessionIdentity {
  readonly runId: string;
  readonly debugSessionId: string;
  readonly clientName: string;
  readonly outDir: string;
  readonly store: Store;
  readonly redaction: RedactionPolicy;
  readonly captureLogprobs: boolean;
}

export class SessionCore {
  readonly id: SessionIdentity;
  status: RunStatus = 'running';
  captureMode: CaptureMode;
  readonly session: SessionRecord;
  readonly log: SdkLogger;
  readonly streamer: Streamer | null = null;
  readonly streamOpts: StreamOptions;
  readonly rulePacks: string[];
  heartbeatTimer: NodeJS.Timeout | null = null;
  lastEvent: string | null = null;

  readonly steps = new Map<number, StepRecord>();
  readonly iterations = new Map<number, StepRecord[]>();
  readonly events = new Map<string, string[]>();
  readonly reasoning: string[] = [];
  readonly modelioByHash = new Map<string, string>();
  /** the last post image hashed, and its hash: a step that changed nothing on screen shows the same bytes, which need no second decode */
  lastPhash: { image: Buffer; hash: Promise<string> } | null = null;
  readonly modelioSeq = new Map<string, number>();
  readonly pendingStepPatches = new Map<number, Array<(s: StepRecord) => void>>();
  readonly sideEffects = new Map<string, SideEffect>();
  readonly evalCandidates = new Map<number, EvalCandidate>();
  readonly outcomes: OutcomeRecord[] = [];
  readonly preferences = new Map<number, Record<string, unknown>>();
  readonly replayPriors = new Map<number, StepRecord>();
  readonly logs = new Map<string, LogFile>();
  readonly signatures = new Map<string, string>();
  /** what was last streamed of each canonical step: close re-sends the ones that changed since */
  readonly sentSteps = new Map<string, string>();
  costs: Costs = {};
  staged: Promise<StagedStore> | null = null;
  readonly writes: Array<Promise<unknown>> = [];
  interventionStop: AbortController | null = null;
  intervention: Promise<void> | null = null;
  manifest: Manifest | null = null;
  closing: Promise<Manifest> | null = null;
  /** the live stream draining after the bundle was written (null without streaming) */
  uploading: Promise<void> | null = null;
  orchestrator = false;
  branch: BranchMode | null = null;

  /** `id` is the DebugSession itself, which resolved its identity from the same options first. */
  constructor(id: SessionIdentity, opts: DebugSessionOptions) {
    this.id = id;
    const env = opts.env ?? process.env;
    this.captureMode = resolveCaptureMode(opts.captureMode ?? null, env);
    this.log = opts.logger ?? defaultLogger;
    this.streamOpts = opts.stream ?? {};
    this.rulePacks = opts.rulePacks ?? ['builtin'];
    if (opts.taskSpec) this.checkOrThrow('task-spec', opts.taskSpec);
    if (opts.branchContext) {
      // a branch context is only defined inside a session record, so it is checked in one
      this.checkOrThrow('session', { run_id: 'x', debug_session_id: 'x', client_name: 'x', started_at: nowIso(), branch_context: opts.branchContext });
    }
    this.session = {
      run_id: this.id.runId,
      debug_session_id: this.id.debugSessionId,
      client_name: this.id.clientName,
      client_version: opts.clientVersion ?? null,
      client_git_sha: opts.clientGitSha ?? null,
      status: 'running',
      capture_mode: this.captureMode,
      tags: { ...(opts.tags ?? {}) },
      started_at: opts.startedAt ?? nowIso(),
      ended_at: null,
      task_spec_id: opts.taskSpecId ?? opts.taskSpec?.task_spec_id ?? null,
      group_id: opts.groupId ?? null,
      redaction_policy: this.id.redaction.id,
      capture_logprobs: this.id.captureLogprobs,
    };
    if (opts.taskSpec) this.session.task_spec = structuredClone(opts.taskSpec);
    if (opts.branchContext) this.session.branch_context = structuredClone(opts.branchContext);
    const dsn = opts.dsn === null ? undefined : (opts.dsn ?? env.TRACE_DSN);
    if (dsn) {
      try {
        this.streamer = new Streamer({
          dsn,
          logger: this.log,
          clientId: this.id.debugSessionId,
          clientName: this.id.clientName,
          queueMax: this.streamOpts.queueMax,
          batchMax: this.streamOpts.batchMax,
          lingerMs: this.streamOpts.lingerMs,
          fetch: this.streamOpts.fetch,
        });
      } catch (err) {
        this.log.warn(`streaming is off: ${(err as Error).message}`);
      }
    }
  }

  get runPath(): string {
    return `/runs/${encodeURIComponent(this.id.runId)}`;
  }

  post(job: StreamJob): void {
    this.streamer?.enqueue(job);
  }

  /** Heartbeats from the first one on; the timer is unref'd so a session never keeps its process alive. */
  startHeartbeat(): void {
    this.heartbeat();
    const every = this.streamOpts.heartbeatIntervalMs ?? 15_000;
    this.heartbeatTimer = setInterval(() => this.heartbeat(), every);
    this.heartbeatTimer.unref();
  }

  private heartbeat(): void {
    this.post({
      kind: 'heartbeat',
      method: 'POST',
      path: '/heartbeat',
      key: 'heartbeat',
      body: () => ({
        client_id: this.id.debugSessionId,
        client_name: this.id.clientName,
        client_version: this.session.client_version ?? null,
        capture_mode: this.captureMode,
        run_id: this.id.runId,
        last_event: this.lastEvent,
      }),
    });
  }

  checkOrThrow(kind: Parameters<typeof checkRecord>[0], value: unknown, root = ''): void {
    const msg = checkRecord(kind, value, root);
    if (msg) throw new ValueError(`invalid ${kind}: ${msg}`);
  }

  setStatus(status: RunStatus): void {
    this.checkOrThrow('session', { ...this.session, status });
    this.status = status;
    this.session.status = status;
  }

  assertOpen(): void {
    if (this.manifest || this.closing) throw new Error('the session is closed');
  }

  refuseOnOrchestrator(method: string): void {
    if (this.orchestrator) throw new RuntimeError(`${method} is not available on an orchestrator session`);
  }

  step(stepIndex: number, method: string): StepRecord {
    const s = this.steps.get(stepIndex);
    if (!s) throw new ValueError(`${method}: no step ${stepIndex}`);
    return s;
  }

  /** The body is read when the job is sent, so a step patched while queued goes out once, as it is then. */
  streamStep(s: StepRecord): void {
    const idx = s.step_index;
    const key = `step:${idx}:${s.step_id}`;
    // a step record still waiting to go out is read when it is sent: a patch needs no new job
    if (this.streamer?.pending(key)) return;
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

  touched(s: StepRecord): void {
    this.lastEvent = `step:${s.step_index}`;
    this.streamStep(s);
  }

  stagedStore(): Promise<StagedStore> {
    if (!this.staged) {
      this.staged = this.id.store.stage
        ? this.id.store.stage()
        : Promise.resolve({ store: this.id.store, commit: async () => undefined, discard: async () => undefined });
    }
    return this.staged;
  }

  /** Writes a file into the bundle being built; remembers its signature for the manifest. */
  async putFile(relpath: string, data: string | Uint8Array): Promise<void> {
    const { store } = await this.stagedStore();
    this.signatures.set(relpath, sha256Hex(data));
    await writeBytes(store, relpath, data);
  }

  /** Background work close() waits for; a failure is logged (validate_bundle then names the missing file). */
  track<T>(p: Promise<T>): Promise<T> {
    this.writes.push(p.catch((err: Error) => this.log.warn(`bundle write failed: ${err.message}`)));
    return p;
  }

  /** Observations and model calls may arrive before their step: the patch waits for recordStep. */
  patchStep(stepIndex: number, patch: (s: StepRecord) => void): void {
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

  branchSlice(): StepRecord['branch_context'] | undefined {
    const bc = this.session.branch_context;
    if (!bc) return undefined;
    const slice: NonNullable<StepRecord['branch_context']> = { parent_run_id: bc.parent_run_id, branch_point_step_index: bc.branch_point_step_index, mutated_axis: bc.mutated_axis };
    if (bc.branch_id) slice.branch_id = bc.branch_id;
    return slice;
  }
}
