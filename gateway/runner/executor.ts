// The plan interpreter: runs one run's steps on a plane through the step
// handlers, with sections and gates, required steps, retries per failure
// class, the hints success contract, loops (inline bodies and loop_target
// jumps), the guards and the budgets; records every step, emits events, saves
// rows, and ends the run exactly once whatever happens.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import type { Brain, Plane, Step, StepContext, StepHandler, StepResult } from '../plugins/contract.ts';
import { runDir, type RunRecord } from '../runs/records.ts';
import type { RunOutcome } from '../runs/runs-service.ts';
import type { EventListener } from '../runs/events.ts';
import type { Extract } from '../../schemas/types.gen.ts';
import { checkRows, toCsv } from './extraction.ts';
import { averageHash, frameDigest } from './fingerprint.ts';
import { DriftGuard, LoopStuckGuard } from './guards.ts';
import type { RunRecorder, RunRecording } from './recording.ts';
import type { FrameHub } from '../runs/frames.ts';
import { judgeGate } from './gates.ts';
import { RETRIES, backoffMs, haltClassFor, runErrorFor } from './outcome.ts';
import type { PlaneLease, PlaneProvider } from './planes.ts';

export interface RunnerStore {
  load(runId: string): Promise<RunRecord | undefined>;
  save(r: RunRecord): Promise<void>;
  emit(r: RunRecord, type: string, data: Record<string, unknown>): Promise<void>;
  end(r: RunRecord, outcome: RunOutcome): Promise<RunRecord>;
  claimForRunner(runId: string, owner: string, ttlMs: number): Promise<boolean>;
  subscribe(topic: string, listener: EventListener): () => void;
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
  metrics: Metrics;
  log: Logger;
  /** run directories live under <dataDir>/runs/<tenant_id>/<run_id> */
  dataDir: string;
  owner: string;
  maxLoopIterations: number;
  /** longest a single step may take */
  stepTimeoutMs: number;
  /** records each run as a trace; absent: runs are not recorded */
  recorder?: RunRecorder;
  /** live frames for watchers who asked for them */
  frames?: FrameHub;
}

export class Halt extends Error {
  constructor(
    readonly haltClass: string,
    message: string,
    readonly error: string | null = runErrorFor(haltClass),
  ) {
    super(message);
    this.name = 'Halt';
  }
}

export interface StepEntry {
  path: string;
  type: string;
  intent: string;
  success: boolean;
  failure_class?: string;
  final_url: string;
  page_title: string;
  last_action?: { type: string; params: Record<string, unknown>; reasoning: string };
  screenshot_b64?: string;
  data?: string;
  attempts: number;
  rows?: number;
}

const list = (v: unknown): string[] => (v === undefined || v === null ? [] : Array.isArray(v) ? v.map(String) : [String(v)]);

/** Runs a promise against an abort signal: rejects with the signal's reason when it fires. */
function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

const sleep = (ms: number, signal: AbortSignal) =>
  raceAbort(
    new Promise<void>((r) => {
      const t = setTimeout(r, ms);
      t.unref();
    }),
    signal,
  );

class RunState {
  steps: StepEntry[] = [];
  rows: Array<Record<string, unknown>> = [];
  csvFields = new Map<string, string[]>();
  csvRows = new Map<string, Array<Record<string, unknown>>>();
  placeholders = 0;
  cost = 0;
  tokensIn = 0;
  tokensOut = 0;
  retriesSpent = 0;
  finished = false;
  /** The top-level step being executed: where a resume restarts. */
  topIndex = 0;
  /** executed steps so far: the next step's index in the trace */
  traced = 0;
  /** the last step's post screenshot: the next step's pre (nothing acts in between) */
  lastShot: Buffer | undefined;
}

export class RunExecutor {
  constructor(private readonly d: RunnerDeps) {}

  /** Executes a queued run to its end. Never throws: every failure ends the run. */
  async execute(runId: string): Promise<void> {
    const queued = await this.d.store.load(runId);
    if (!queued || queued.status !== 'queued') return;
    const maxMs = queued.runtime.max_time_minutes * 60_000;
    if (!(await this.d.store.claimForRunner(runId, this.d.owner, maxMs + 10 * 60_000))) return;

    const abort = new AbortController();
    const halt = (h: Halt) => {
      if (!abort.signal.aborted) abort.abort(h);
    };
    const timer = setTimeout(() => halt(new Halt('time_cap', `max_time_minutes (${queued.runtime.max_time_minutes}) reached`)), maxMs);
    timer.unref();
    const unsubscribe = this.d.store.subscribe(`run:${runId}`, (e) => {
      if (e.type === 'run.cancel_requested') halt(new Halt('cancelled', 'cancelled by a caller'));
    });

    let run: RunRecord = { ...queued, status: 'running', phase: 'starting', events: [...queued.events, `${new Date().toISOString()} status running`] };
    const st = new RunState();
    st.topIndex = queued.start_step ?? 0;
    const recording = await this.d.recorder?.begin(run);
    let lease: PlaneLease | undefined;
    let outcome: RunOutcome;
    try {
      await this.d.store.save(run);
      await this.d.store.emit(run, 'run.status', { status: 'running', phase: 'starting' });
      try {
        lease = await raceAbort(this.d.planes.open(run, abort.signal), abort.signal);
      } catch (err) {
        if (err instanceof Halt) throw err;
        throw new Halt('plane_unavailable', `no ${run.runtime.compute_backend} could be started: ${(err as Error).message}`);
      }
      lease.lost.then(
        (why) => halt(new Halt('plane_lost', `the compute plane went away: ${why}`)),
        () => {},
      );
      run = { ...run, phase: 'running' };
      await this.d.store.save(run);
      await this.d.store.emit(run, 'run.status', { status: 'running', phase: 'running', backend: lease.plane.capabilities.backend });
      const w = new Walker(this.d, run, lease.plane, st, abort.signal, (r) => (run = r), recording);
      await w.walk(run.plan.steps, 'steps');
      const failed = st.steps.filter((s) => !s.success).length;
      outcome = { status: 'succeeded', summary: summarize(st, run), steps: st.steps, unknownPlaceholderRows: st.placeholders, retriesSpent: st.retriesSpent };
      if (failed > 0 && st.steps.every((s) => !s.success)) outcome = { ...outcome, status: 'failed', error: null };
    } catch (err) {
      const h = err instanceof Halt ? err : abort.signal.reason instanceof Halt ? (abort.signal.reason as Halt) : new Halt('plane_lost', (err as Error).message ?? 'internal error');
      if (!(err instanceof Halt) && !(abort.signal.reason instanceof Halt)) this.d.log.error({ run_id: runId, tenant_id: run.tenant_id, err }, 'run crashed');
      this.d.metrics.loopTermination(h.haltClass);
      outcome = {
        status: h.haltClass === 'cancelled' ? 'cancelled' : 'failed',
        haltClass: h.haltClass,
        error: h.error,
        summary: `${summarize(st, run)}; halted: ${h.message}`,
        steps: st.steps,
        unknownPlaceholderRows: st.placeholders,
        retriesSpent: st.retriesSpent,
        resumeStep: st.topIndex,
      };
    } finally {
      clearTimeout(timer);
      unsubscribe();
      await lease?.close().catch((e: unknown) => this.d.log.warn({ run_id: runId, err: (e as Error).message }, 'plane close failed'));
    }
    try {
      await this.saveArtifacts(run, st);
    } catch (e) {
      this.d.log.error({ run_id: runId, err: (e as Error).message }, 'saving run artifacts failed');
    }
    await recording?.close({ status: outcome.status, halt_class: outcome.haltClass, summary: outcome.summary ?? '', cost_usd: st.cost });
    await this.d.store.end(run, outcome);
  }

  private async saveArtifacts(run: RunRecord, st: RunState): Promise<void> {
    if (st.rows.length === 0 && st.csvRows.size === 0) return;
    const dir = runDir(this.d.dataDir, run);
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'extracted_rows.json'), JSON.stringify(st.rows, null, 2));
    for (const [name, rows] of st.csvRows) await writeFile(path.join(dir, `${name}.csv`), toCsv(st.csvFields.get(name) ?? [], rows));
  }
}

function summarize(st: RunState, run: RunRecord): string {
  const ok = st.steps.filter((s) => s.success).length;
  return `${ok} of ${st.steps.length} executed steps succeeded on ${run.runtime.compute_backend}; ${st.rows.length} rows extracted; cost ${st.cost.toFixed(4)} USD`;
}

/** Walks the steps of one run. */
class Walker {
  private readonly stuck: LoopStuckGuard;
  /** trace index of the step being executed (model calls are filed under it) */
  private tracing = 0;
  private readonly drift: DriftGuard;

  constructor(
    private readonly d: RunnerDeps,
    private run: RunRecord,
    private readonly plane: Plane,
    private readonly st: RunState,
    private readonly signal: AbortSignal,
    private readonly onRun: (r: RunRecord) => void,
    private readonly rec?: RunRecording,
  ) {
    this.stuck = new LoopStuckGuard(Number(run.runtime.state_repeat_threshold ?? 0));
    this.drift = new DriftGuard(String(run.runtime.pinned_source_url_pattern ?? ''), Number(run.runtime.off_source_step_budget ?? 0));
  }

  private check(): void {
    if (this.signal.aborted) throw this.signal.reason;
  }

  /** Runs a list of steps; returns 'end_loop' when a step asked the enclosing loop to stop. */
  async walk(steps: Step[], at: string): Promise<'ok' | 'end_loop'> {
    const visits = new Map<number, number>();
    const top = at === 'steps';
    // a resumed run starts at the top-level step where the earlier run stopped
    let i = top ? Math.min(this.run.start_step ?? 0, steps.length) : 0;
    while (i < steps.length && !this.st.finished) {
      this.check();
      if (top) this.st.topIndex = i;
      const step = steps[i]!;
      const p = `${at}[${i}]`;
      if (step.type === 'loop') {
        if (Array.isArray(step.steps) && step.steps.length > 0) {
          await this.inlineLoop(step, p);
        } else {
          // a loop without a body jumps back: to loop_target, or right after its section's start
          const count = Math.min(step.loop_count ?? this.d.maxLoopIterations, this.d.maxLoopIterations);
          const n = (visits.get(i) ?? 0) + 1;
          visits.set(i, n);
          await this.iterationGuards(`${p} iteration ${n}`);
          if (n < count) {
            const target = step.loop_target !== undefined && step.loop_target >= 0 ? step.loop_target : this.sectionStart(steps, i) + 1;
            if (target < i) {
              i = target;
              continue;
            }
          } else this.d.metrics.loopTermination('count_reached');
        }
        i++;
        continue;
      }
      const result = await this.step(step, p);
      if (result.end_loop) return 'end_loop';
      i++;
    }
    return 'ok';
  }

  private sectionStart(steps: Step[], i: number): number {
    const section = steps[i]!.section;
    if (!section) return -1;
    const first = steps.findIndex((s) => s.section === section);
    return first >= 0 && first < i ? first : -1;
  }

  private async inlineLoop(step: Step, p: string): Promise<void> {
    const count = Math.min(step.loop_count ?? this.d.maxLoopIterations, this.d.maxLoopIterations);
    await this.emit('loop.started', { path: p, loop_count: count });
    let reason = 'count_reached';
    for (let n = 1; n <= count; n++) {
      this.check();
      const r = await this.walk(step.steps!, `${p}.steps`);
      await this.emit('loop.iteration', { path: p, iteration: n });
      if (this.st.finished) {
        reason = 'done';
        break;
      }
      if (r === 'end_loop') {
        reason = 'end_of_pages';
        break;
      }
      await this.iterationGuards(`${p} iteration ${n}`);
    }
    this.d.metrics.loopTermination(reason);
    await this.emit('loop.ended', { path: p, reason });
  }

  private async iterationGuards(where: string): Promise<void> {
    const threshold = Number(this.run.runtime.state_repeat_threshold ?? 0);
    if (threshold > 0) {
      const fp = await this.fingerprint();
      if (this.stuck.observe(fp)) throw new Halt('loop_stuck', `${threshold} consecutive iterations showed the same page (${where})`);
    }
  }

  private async fingerprint(): Promise<string> {
    const shot = await this.plane.screenshot('jpeg');
    const hash = await averageHash(shot.image);
    const dom = this.plane.dom;
    const url = dom ? await dom.currentUrl().catch(() => '') : '';
    const text = dom ? await dom.evaluate<string>('document.body ? document.body.innerText.slice(0, 20000) : ""').catch(() => '') : '';
    return `${url}\n${hash}\n${text}`;
  }

  private async emit(type: string, data: Record<string, unknown>): Promise<void> {
    await this.d.store.emit(this.run, type, data);
  }

  private async log(line: string): Promise<void> {
    this.run = { ...this.run, events: [...this.run.events.slice(-5000), `${new Date().toISOString()} ${line}`] };
    this.onRun(this.run);
  }

  /** Resolves `_recipe` into the step's extract block (tenant recipe first, then shipped). */
  private async effectiveStep(step: Step): Promise<Step> {
    if (!step._recipe) return step;
    const schema = await this.d.recipe(this.run.tenant_id, step._recipe).catch(() => {
      throw new Halt('no_schema_configured', `recipe '${step._recipe}' not found`);
    });
    return { ...step, extract: { ...(schema as Extract), ...(step.extract ?? {}) } };
  }

  /** A live frame after a step, only when a watcher of this run asked for frames. */
  private async frame(p: string, png: Buffer | undefined): Promise<void> {
    const hub = this.d.frames;
    if (!hub?.wants(this.run.run_id)) return;
    const shot = png ? { image: png, format: 'png' as const } : await this.plane.screenshot('jpeg').then((s) => ({ image: s.image, format: 'jpeg' as const }), () => undefined);
    if (!shot) return;
    hub.publish({ type: 'frame', run_id: this.run.run_id, path: p, ts: new Date().toISOString(), format: shot.format, image_b64: shot.image.toString('base64') });
  }

  private async png(): Promise<Buffer | undefined> {
    return (await this.plane.screenshot().catch(() => undefined))?.image;
  }

  /** Hands a finished step to the run's recording: grounding, verdict, side effect, the step and its screenshots. */
  private async record(
    rec: RunRecording,
    ti: number,
    step: Step,
    entry: StepEntry,
    result: StepResult,
    o: { startedAt: string; costBefore: number; effect: string; pre?: Buffer; post?: Buffer },
  ): Promise<void> {
    const a = result.last_action;
    if (a && typeof a.params.x === 'number' && typeof a.params.y === 'number') {
      rec.decision(ti, 'grounding', 'select', a.reasoning || `${a.type} at ${a.params.x},${a.params.y}`, { action: a.type, x: a.params.x, y: a.params.y, provenance: this.plane.dom ? 'dom' : 'screenshot' });
    }
    const hints = step.hints ?? {};
    const contract = step.gate || hints.expect_url_contains !== undefined || hints.expect_url_excludes !== undefined || hints.expect_text_present !== undefined;
    const verdict = contract ? { status: entry.success ? ('passed' as const) : ('failed' as const), reason: entry.success ? `${step.gate ? 'gate' : 'success contract'} held at ${entry.final_url}` : (entry.data ?? entry.failure_class ?? 'failed') } : undefined;
    if (verdict) rec.decision(ti, 'verifier', 'check', verdict.reason.slice(0, 300), { status: verdict.status, gate: Boolean(step.gate) });
    rec.settleSideEffect(o.effect, entry.success, entry.success ? `landed on ${entry.final_url}` : (entry.failure_class ?? 'failed'));
    await rec.step(
      {
        index: ti,
        path: entry.path,
        type: entry.type,
        intent: entry.intent,
        success: entry.success,
        failure_class: entry.failure_class,
        final_url: entry.final_url,
        page_title: entry.page_title,
        ...(a ? { action: a } : {}),
        attempts: entry.attempts,
        started_at: o.startedAt,
        ended_at: new Date().toISOString(),
        cost_usd: this.st.cost - o.costBefore,
        ...(verdict ? { verdict } : {}),
        ...(entry.data ? { data: entry.data } : {}),
      },
      { pre: o.pre, post: o.post },
    );
    this.st.lastShot = o.post;
  }

  private async pageInfo(): Promise<{ url: string; title: string }> {
    const dom = this.plane.dom;
    if (!dom) return { url: '', title: '' };
    const url = await dom.currentUrl().catch(() => '');
    const title = await dom.evaluate<string>('document.title').catch(() => '');
    return { url, title: typeof title === 'string' ? title : '' };
  }

  private context(step: Step, p: string, brain: Brain | undefined): StepContext {
    return {
      runId: this.run.run_id,
      tenantId: this.run.tenant_id,
      step,
      path: p,
      plane: this.plane,
      brain,
      brainFor: (id) => this.d.brain(id ?? this.run.cua_model, this.run.tenant_id),
      signal: this.signal,
      recipe: (name) => this.d.recipe(this.run.tenant_id, name),
      callTool: (name, args) => this.d.callTool(name, args, { runId: this.run.run_id, tenantId: this.run.tenant_id, signal: this.signal }),
      addCost: (usd, tokens) => {
        this.st.cost += usd;
        this.st.tokensIn += tokens?.tokens_in ?? 0;
        this.st.tokensOut += tokens?.tokens_out ?? 0;
        if (this.st.cost > this.run.runtime.max_cost) {
          throw new Halt('budget_cap', `cost ${this.st.cost.toFixed(4)} USD passed max_cost ${this.run.runtime.max_cost}`);
        }
      },
      log: (m) => void this.log(`${p} ${m}`),
      recordModelIo: (layer, request, response) => this.rec?.modelIo(this.tracing, layer, request, response),
    };
  }

  private async step(original: Step, p: string): Promise<StepResult> {
    const step = await this.effectiveStep(original);
    await this.emit('step.started', { path: p, type: step.type, intent: step.intent });
    const startedAt = new Date().toISOString();
    const costBefore = this.st.cost;
    const ti = this.st.traced++;
    this.tracing = ti;
    const rec = this.rec;
    // the pre observation of the first step; later steps reuse the previous step's post
    const pre = rec?.wantsScreenshots ? (this.st.lastShot ?? (await this.png())) : undefined;
    rec?.decision(ti, 'planner', 'select', `${step.type}: ${step.intent}`.slice(0, 300), { path: p, type: step.type });
    const handler = this.d.handler(step.type);
    const effect = handler?.sideEffect && rec ? rec.declareSideEffect(ti, `${step.intent} (${p})`, handler.sideEffect) : '';
    let result: StepResult;
    let attempts = 0;
    if (!handler) {
      result = { success: false, failure_class: 'unknown', data: `no handler serves step type '${step.type}'` };
      attempts = 1;
    } else if (handler.needs?.recipe && !step.extract) {
      result = { success: false, failure_class: 'extractor_error', data: `step type '${step.type}' needs an extraction schema: an extract block or a _recipe`, halt: { halt_class: 'no_schema_configured' } };
      attempts = 1;
    } else if (handler.needs?.domAware && !this.plane.capabilities.dom_aware) {
      result = { success: false, failure_class: 'unknown', data: `step type '${step.type}' needs a DOM-aware plane (compute_backend dom_plane)` };
      attempts = 1;
    } else {
      const brain = handler.needs?.brain ? this.d.brain(this.run.cua_model, this.run.tenant_id) : undefined;
      if (handler.needs?.brain && !brain) {
        result = { success: false, failure_class: 'unknown', data: `brain '${this.run.cua_model}' is not configured on this deployment` };
        attempts = 1;
      } else {
        for (;;) {
          attempts++;
          result = await this.attempt(handler, step, p, brain);
          if (result.success || result.halt) break;
          const fc = result.failure_class ?? 'unknown';
          if (attempts > RETRIES[fc] || result.retryable === false) break;
          this.st.retriesSpent++;
          rec?.decision(ti, 'recovery', 'retry', `${step.type} failed (${fc}); retry ${attempts}`, { failure_class: fc, attempt: attempts + 1 });
          await this.log(`${p} ${step.type} failed (${fc}); retry ${attempts}`);
          await sleep(backoffMs(attempts), this.signal);
        }
        if (!result.success && !result.halt && typeof step.hints?.fallback_url === 'string' && handler.checks?.successContract) {
          rec?.decision(ti, 'recovery', 'fallback', 'navigating to hints.fallback_url after repeated misses', { url: step.hints.fallback_url });
          await this.plane.act({ type: 'NAVIGATE', url: step.hints.fallback_url });
          result = { ...result, success: true, failure_class: undefined, data: `${result.data ?? ''} recovered by navigating to hints.fallback_url`.trim() };
        }
      }
    }
    if (result.halt) {
      rec?.settleSideEffect(effect, false, `halted: ${result.halt.halt_class}`);
      throw new Halt(result.halt.halt_class, result.data ?? result.halt.halt_class, result.halt.error ?? runErrorFor(result.halt.halt_class));
    }
    if (result.finish) this.st.finished = true;

    // rows: typed and checked against the extract block
    let rowCount: number | undefined;
    if (result.success && result.rows) {
      const extract: Extract = step.extract ?? { fields: Object.keys(result.rows[0] ?? {}).map((name) => ({ name, type: 'str' as const })) };
      const checked = checkRows(extract, result.rows);
      this.st.rows.push(...checked.rows);
      this.st.placeholders += checked.unknown_placeholder_row_count;
      const name = (extract.schema_name ?? 'rows').replace(/[^A-Za-z0-9_-]/g, '_') || 'rows';
      this.st.csvFields.set(name, (extract.fields ?? []).map((f) => f.name));
      this.st.csvRows.set(name, [...(this.st.csvRows.get(name) ?? []), ...checked.rows]);
      rowCount = checked.rows.length;
      if (checked.rows.length === 0 && handler?.checks?.rows) {
        result = { ...result, success: false, failure_class: 'extractor_error', data: `no rows passed the extract block (${checked.dropped_partial} partial rows dropped)` };
      }
    }

    // the post observation is taken beside the page info: one round trip less per step
    const [info, post] = await Promise.all([this.pageInfo(), rec?.wantsScreenshots || !result.success ? this.png() : undefined]);
    const entry: StepEntry = {
      path: p,
      type: step.type,
      intent: step.intent,
      success: result.success,
      ...(result.failure_class ? { failure_class: result.failure_class } : {}),
      final_url: info.url,
      page_title: info.title,
      ...(result.last_action ? { last_action: result.last_action } : {}),
      ...(result.data ? { data: result.data.slice(0, 1000) } : {}),
      attempts,
      ...(rowCount !== undefined ? { rows: rowCount } : {}),
    };
    if (!result.success && post) entry.screenshot_b64 = post.toString('base64');
    this.st.steps.push(entry);
    if (rec) await this.record(rec, ti, step, entry, result, { startedAt, costBefore, effect, pre, post });
    await this.frame(p, post);
    await this.log(`${p} ${step.type} ${result.success ? 'ok' : `failed (${result.failure_class ?? 'unknown'})`}${result.data ? `: ${result.data.slice(0, 200)}` : ''}`);
    const { screenshot_b64: _shot, ...eventEntry } = entry;
    await this.emit('step.finished', { ...eventEntry, cost_usd: this.st.cost });
    this.onRun(this.run);
    await this.d.store.save({ ...this.run, steps: this.st.steps });

    if (this.drift.observe(info.url)) throw new Halt('off_source_drift', `more than ${this.run.runtime.off_source_step_budget} consecutive steps outside ${this.run.runtime.pinned_source_url_pattern}`);
    if (!result.success && step.gate) throw new Halt('gate_failed', `gate ${p} did not pass: ${result.data ?? result.failure_class ?? ''}`);
    if (!result.success && step.required) throw new Halt(haltClassFor(handler?.haltClass, result.failure_class), `required step ${p} (${step.type}) failed: ${result.failure_class ?? 'unknown'}`);
    return result;
  }

  /** One attempt of a handler, with the hints success contract and no_state_change demotion. */
  private async attempt(handler: StepHandler, step: Step, p: string, brain: Brain | undefined): Promise<StepResult> {
    const watchState = handler.checks?.stateChange === true;
    const before = watchState ? await this.stateSnapshot() : undefined;
    let result: StepResult;
    const ctx = this.context(step, p, brain);
    try {
      const timeout = AbortSignal.timeout(this.d.stepTimeoutMs);
      const signal = AbortSignal.any([this.signal, timeout]);
      result = await raceAbort(handler.run(ctx), signal).catch((err: unknown) => {
        if (this.signal.aborted) throw this.signal.reason;
        if (timeout.aborted) throw new Halt('halt_timeout', `step ${p} (${step.type}) took longer than ${this.d.stepTimeoutMs} ms`);
        throw err;
      });
    } catch (err) {
      if (err instanceof Halt) throw err;
      if (this.signal.aborted) throw this.signal.reason;
      return { success: false, failure_class: 'unknown', data: `handler error: ${(err as Error).message}`.slice(0, 500) };
    }
    if (!result.success) return result;
    if (step.gate && step.verify) {
      const verdict = await judgeGate(ctx, ctx.brainFor?.('hosted-api'), step.verify);
      if (verdict && !verdict.success) return verdict;
    }
    const hints = step.hints ?? {};
    if (handler.checks?.successContract && this.plane.dom) {
      const url = await this.plane.dom.currentUrl().catch(() => '');
      const contains = list(hints.expect_url_contains);
      const excludes = list(hints.expect_url_excludes);
      if (contains.some((c) => !url.includes(c)) || excludes.some((x) => url.includes(x))) {
        return { ...result, success: false, failure_class: 'wrong_target', data: `post-action URL ${url} breaks the hints success contract` };
      }
      const present = list(hints.expect_text_present);
      if (present.length > 0) {
        const text = await this.plane.dom.evaluate<string>('document.body ? document.body.innerText : ""').catch(() => '');
        if (present.every((t) => text.includes(t))) return result;
        return { ...result, success: false, failure_class: 'submit_failed', data: 'expected text did not appear after the action' };
      }
    }
    if (before !== undefined && reliesOnStateChange(hints)) {
      const after = await this.stateSnapshot();
      if (after === before) return { ...result, success: false, failure_class: 'no_state_change', data: 'URL, page and scroll did not change' };
    }
    return result;
  }

  /**
   * What "the state changed" compares. DOM-aware planes answer from the page in
   * one call (URL, scroll, a hash of the rendered text and the element count),
   * which sees what a person would and costs a few ms; other planes compare a
   * screenshot hash (JPEG: half the capture cost of PNG, same 8x8 hash).
   */
  private async stateSnapshot(): Promise<string> {
    if (this.plane.dom) {
      const s = await this.plane.dom.evaluate<string>(PAGE_STATE_SCRIPT).catch(() => undefined);
      if (typeof s === 'string') return s;
    }
    const shot = await this.plane.screenshot('jpeg').catch(() => undefined);
    const url = this.plane.dom ? await this.plane.dom.currentUrl().catch(() => '') : '';
    return `${url}|${shot ? await frameDigest(shot.image) : ''}|${shot?.scroll_y ?? ''}`;
  }
}

const PAGE_STATE_SCRIPT = `(() => {
  const t = document.body ? document.body.innerText : '';
  let h = 0x811c9dc5;
  for (let i = 0; i < t.length; i++) { h ^= t.charCodeAt(i); h = Math.imul(h, 0x01000193); }
  return [location.href, scrollX, scrollY, document.getElementsByTagName('*').length, t.length, (h >>> 0).toString(16)].join('|');
})()`;

/** no_state_change applies unless the step names its own success contract (text present covers in-place submits). */
function reliesOnStateChange(hints: NonNullable<Step['hints']>): boolean {
  return list(hints.expect_text_present).length === 0;
}

