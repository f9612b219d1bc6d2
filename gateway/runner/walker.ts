// Walks the steps of one run: sections and loops (inline bodies and loop_target
// jumps), the loop guards, retries per failure class, rows, and each step's entry,
// trace record, events and saved progress.
import { UrlContextBudget } from './url-budget.ts';
import { sleep } from '../../shared/abort.ts';
import type { Brain, Plane, Step, StepContext, StepResult } from '../plugins/contract.ts';
import type { RunRecord } from '../runs/records.ts';
import { attemptStep, look, type PageEnd } from './attempt.ts';
import { runReverse, wantsReverse } from './reverse.ts';
import { checkStepRows } from './step-rows.ts';
import { rejectionFor } from '../../shared/recipe-keys.ts';
import { pageFingerprint } from './fingerprint.ts';
import { DriftGuard, LoopStuckGuard } from './guards.ts';
import { Halt, RETRIES, backoffMs, failureClassOfHalt, haltClassFor, proxyFailure, runErrorFor, withRecipe } from './outcome.ts';
import type { RunRecording } from './recording.ts';
import type { PlaneLease } from './planes.ts';
import type { RunnerDeps } from './deps.ts';
import type { RunState, StepEntry } from './run-state.ts';
import { publishFrame, recordStep } from './step-record.ts';
import { RunProgress } from './progress.ts';
import { vaultSide } from './secret-plane.ts';
import { humanFields, operatorPause, type HumanSide } from './human.ts';
import { replayFields, type ReplaySession } from '../replay/session.ts';


interface StepTrack {
  /** its entry is in the run's steps */
  recorded: boolean;
  attempts: number;
  /** the last attempt's result */
  result?: StepResult;
}

/** loop.iteration events of one loop past this many are coalesced: every 10th only (loop.ended has the count). */
const ITERATION_EVENTS = 10;

export class Walker {
  private readonly stuck: LoopStuckGuard;
  /** trace index of the step being executed (model calls are filed under it) */
  private tracing = 0;
  private readonly drift: DriftGuard;
  private readonly progress: RunProgress;
  /** the run's per-URL context budget, charged by every model call its steps make */
  private readonly urlBudget: UrlContextBudget;
  /** trace records and live frames waiting for their step's post screenshot (see afterShot) */
  private shotWork: Promise<void> = Promise.resolve();
  /** the plane handlers act on (typing the credentials steps name, through the vault) and its origin check */
  private readonly vault: Pick<StepContext, 'plane' | 'secretCheck'>;

  constructor(
    private readonly d: RunnerDeps,
    private run: RunRecord,
    private readonly plane: Plane,
    private readonly st: RunState,
    private readonly signal: AbortSignal,
    private readonly onRun: (r: RunRecord) => void,
    /** the plane's lease: why the plane went away, once it has (an agent, browser or display died), and the proxy's rotation */
    private readonly lease: Pick<PlaneLease, 'isLost' | 'rotateProxy'>,
    private readonly rec?: RunRecording,
    private readonly human?: HumanSide,
    private readonly replay?: ReplaySession,
  ) {
    this.stuck = new LoopStuckGuard(Number(run.runtime.state_repeat_threshold ?? 0));
    this.urlBudget = new UrlContextBudget(d.urlContextBudget ?? 0);
    this.progress = new RunProgress(d.store, d.owner);
    this.drift = new DriftGuard(String(run.runtime.pinned_source_url_pattern ?? ''), Number(run.runtime.off_source_step_budget ?? 0));
    this.vault = vaultSide(plane, d.reveal && ((ref, url) => d.reveal!(run.tenant_id, ref, url)));
  }

  /** Throws what stops the run: a cancel, a cap, or a plane that is gone. */
  check(): void {
    if (this.signal.aborted) throw this.signal.reason;
    const lost = this.lease.isLost();
    if (lost !== undefined) throw new Halt('plane_lost', `the compute plane went away: ${lost}`);
  }

  /** Runs a list of steps; returns 'end_loop' when a step asked the enclosing loop to stop. */
  async walk(steps: Step[], at: string): Promise<'ok' | 'end_loop'> {
    const visits = new Map<number, number>();
    const top = at === 'steps';
    // a resumed run starts at the top-level step where the earlier run stopped
    let i = top ? Math.min(this.run.start_step ?? 0, steps.length) : 0;
    while (i < steps.length && !this.st.finished) {
      this.check();
      if (top && this.st.topIndex !== i) {
        this.st.topIndex = i;
        await this.progress.checkpointAt(this.run, this.st.steps, i, steps[i]!.type === 'loop');
      }
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
    let n = 1;
    for (; n <= count; n++) {
      this.check();
      const r = await this.walk(step.steps!, `${p}.steps`);
      if (n <= ITERATION_EVENTS || n % 10 === 0) await this.emit('loop.iteration', { path: p, iteration: n });
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
    await this.emit('loop.ended', { path: p, reason, iterations: Math.min(n, count) });
  }

  private async iterationGuards(where: string): Promise<void> {
    const threshold = Number(this.run.runtime.state_repeat_threshold ?? 0);
    if (threshold > 0 && this.stuck.observe(await pageFingerprint(this.plane))) throw new Halt('loop_stuck', `${threshold} consecutive iterations showed the same page (${where})`);
  }

  private emit(type: string, data: Record<string, unknown>): Promise<void> {
    return this.progress.emit(this.run, type, data);
  }

  private log(line: string): void {
    this.run = { ...this.run, events: [...this.run.events.slice(-5000), `${new Date().toISOString()} ${line}`] };
    this.onRun(this.run);
  }

  /** Work that waits for a step's post screenshot, in step order; settled() waits for all of it. */
  private afterShot(shot: Promise<Buffer | undefined>, then: (post: Buffer | undefined) => Promise<void>): void {
    this.shotWork = this.shotWork
      .then(() => shot)
      .then(then)
      .catch((err: unknown) => this.log(`trace record or live frame failed: ${(err as Error)?.message ?? String(err)}`));
  }

  /**
   * Resolves once the last step's screenshot and what waits for it (its trace record,
   * its live frame) are done, or after 5 s (a plane that hangs); never rejects. The
   * run's plane closes and its trace is written only after this.
   */
  settled(): Promise<void> {
    return Promise.race([this.shotWork, sleep(5000)]);
  }

  private async png(): Promise<Buffer | undefined> {
    return (await this.plane.screenshot().catch(() => undefined))?.image;
  }

  private pageInfo(): Promise<{ url: string; title: string }> {
    return look(this.plane, false);
  }

  private context(step: Step, p: string, signal: AbortSignal, brain: Brain | undefined): StepContext {
    return {
      runId: this.run.run_id,
      tenantId: this.run.tenant_id,
      allowedDomains: this.run.allowed_domains ?? [],
      step,
      path: p,
      ...this.vault,
      ...humanFields(this.human, this.run.runtime, p),
      brain,
      brainFor: (id) => this.urlBudget.wrap(this.d.brain(id ?? this.run.cua_model, this.run.tenant_id)),
      signal,
      recipe: (name) => this.d.recipe(this.run.tenant_id, name),
      callTool: (name, args) => this.d.callTool(name, args, { runId: this.run.run_id, tenantId: this.run.tenant_id, signal }),
      addCost: (usd, tokens) => {
        this.st.cost += usd;
        this.st.tokensIn += tokens?.tokens_in ?? 0;
        this.st.tokensOut += tokens?.tokens_out ?? 0;
        if (this.st.cost > this.run.runtime.max_cost) {
          throw new Halt('budget_cap', `cost ${this.st.cost.toFixed(4)} USD passed max_cost ${this.run.runtime.max_cost}`);
        }
      },
      log: (m) => this.log(`${p} ${m}`),
      recordModelIo: (layer, request, response) => this.rec?.modelIo(this.tracing, layer, request, response),
    };
  }

  /** Runs the handler with retries; a result that says why the step could not even start. */
  private async runHandler(step: Step, p: string, ti: number, track: StepTrack, ready?: Promise<unknown>): Promise<{ result: StepResult; attempts: number; end?: PageEnd }> {
    const handler = this.replay ? this.replay.handler(step, p) : this.d.handler(step.type);
    if (!handler) return { result: { success: false, failure_class: 'unknown', data: `no handler serves step type '${step.type}'` }, attempts: 1 };
    // a step whose intent the recipe's rejection_intents recognise is answered with their rejection, before anything acts
    const rejected = rejectionFor(step, step.intent);
    if (rejected) return { result: { success: false, failure_class: 'unknown', data: `rejected_intent ${JSON.stringify(rejected.phrase)}: ${rejected.message}`, halt: { halt_class: rejected.halt_class } }, attempts: 1 };
    if (handler.needs?.recipe && !step.extract) {
      return { result: { success: false, failure_class: 'extractor_error', data: `step type '${step.type}' needs an extraction schema: an extract block or a _recipe`, halt: { halt_class: 'no_schema_configured' } }, attempts: 1 };
    }
    if (handler.needs?.domAware && !this.plane.capabilities.dom_aware) {
      return { result: { success: false, failure_class: 'unknown', data: `step type '${step.type}' needs a DOM-aware plane (compute_backend dom_plane)` }, attempts: 1 };
    }
    const brain = handler.needs?.brain ? this.urlBudget.wrap(this.d.brain(this.run.cua_model, this.run.tenant_id)) : undefined;
    if (handler.needs?.brain && !brain) return { result: { success: false, failure_class: 'unknown', data: `brain '${this.run.cua_model}' is not configured on this deployment` }, attempts: 1 };
    let attempts = 0;
    let rotated = false;
    let result: StepResult;
    /** how the last attempt left the page */
    let end: PageEnd | undefined;
    for (;;) {
      attempts++;
      track.attempts = attempts;
      const attempt = { handler, step, path: p, plane: this.plane, signal: this.signal, stepTimeoutMs: this.d.stepTimeoutMs, clock: this.human?.clock, brain, wantsShot: this.rec?.wantsScreenshots === true, ready, context: (signal: AbortSignal, b: Brain | undefined) => this.context(step, p, signal, b) };
      ({ result, end } = await attemptStep(attempt));
      track.result = result;
      // a step that failed because its plane died is not retried: the run halts plane_lost
      this.check();
      if (result.success || result.halt) break;
      const fc = result.failure_class ?? 'unknown';
      if (attempts > RETRIES[fc] || result.retryable === false) break;
      if (wantsReverse(attempt, result)) {
        this.rec?.decision(ti, 'recovery', 'retry', `undoing the failed attempt before a retry: ${step.reverse}`.slice(0, 300), { reverse: step.reverse });
        const undo = await runReverse(attempt);
        end = undefined;
        this.check();
        this.log(`${p} reverse ${undo.success ? 'done' : `failed (${undo.failure_class ?? 'unknown'})`}`);
        if (!undo.success) {
          result = { ...result, data: `${result.data ?? ''}; reverse failed, not retried: ${undo.data ?? undo.failure_class ?? ''}`.replace(/^; /, '').slice(0, 1000) };
          break;
        }
      }
      this.st.retriesSpent++;
      // a proxy that refused or failed: the retry goes out on a new sticky session, once per step
      if (!rotated && proxyFailure(result.data ?? '') && (await this.lease.rotateProxy?.())) {
        rotated = true;
        this.rec?.decision(ti, 'recovery', 'retry', 'the proxy failed: retrying on a new sticky session', { failure: (result.data ?? '').slice(0, 200) });
      }
      this.rec?.decision(ti, 'recovery', 'retry', `${step.type} failed (${fc}); retry ${attempts}`, { failure_class: fc, attempt: attempts + 1 });
      this.log(`${p} ${step.type} failed (${fc}); retry ${attempts}`);
      await sleep(backoffMs(attempts), this.signal);
    }
    if (!result.success && !result.halt && typeof step.hints?.fallback_url === 'string' && handler.checks?.successContract) {
      this.rec?.decision(ti, 'recovery', 'fallback', 'navigating to hints.fallback_url after repeated misses', { url: step.hints.fallback_url });
      const landed = await this.plane.act({ type: 'NAVIGATE', url: step.hints.fallback_url });
      end = undefined;
      this.check();
      // the recovery is the fallback page itself: one that did not load recovers nothing
      const broken = landed.nav_error ? `${landed.nav_error.code} (${landed.nav_error.message})` : (landed.http_status ?? 0) >= 400 ? `HTTP ${landed.http_status}` : undefined;
      result = broken
        ? { ...result, data: `${result.data ?? ''}; hints.fallback_url did not load: ${broken}`.replace(/^; /, '') }
        : { ...result, success: true, failure_class: undefined, data: `${result.data ?? ''} recovered by navigating to hints.fallback_url`.trim() };
    }
    return { result, attempts, end };
  }

  private async step(original: Step, p: string): Promise<StepResult> {
    if (this.st.traced >= this.d.maxRunSteps) {
      throw new Halt('budget_cap', `the run executed ${this.st.traced} steps, the most one run may (SERVICE_MAX_RUN_STEPS)`, null);
    }
    // an operator's takeover waits for its page before the step acts
    if (this.human) await operatorPause(this.human, p);
    const track: StepTrack = { recorded: false, attempts: 0 };
    try {
      return await this.runStep(original, p, track);
    } catch (err) {
      // the step that halted the run is the one a caller most needs to see; a runner that lost the run writes nothing more
      if (err instanceof Halt && err.haltClass !== 'runner_lost' && !track.recorded) await this.haltEntry(original, p, track, err);
      throw err;
    }
  }

  /** The entry of a step a halt interrupted: what the page showed, and why the run stopped. */
  private async haltEntry(step: Step, p: string, t: StepTrack, h: Halt): Promise<void> {
    // the plane may be gone or hung (plane_lost): what cannot be read within 5 s stays empty
    const within = <T>(x: Promise<T>, dflt: T): Promise<T> => Promise.race([x, sleep(5000).then(() => dflt)]);
    const [info, shot] = await Promise.all([within(this.pageInfo(), { url: '', title: '' }), within(this.png(), undefined)]);
    const a = t.result?.last_action;
    const entry: StepEntry = {
      path: p,
      type: step.type,
      intent: step.intent,
      success: false,
      failure_class: t.result?.failure_class ?? failureClassOfHalt(h.haltClass, step.type),
      final_url: info.url,
      page_title: info.title,
      ...(a ? { last_action: a } : {}),
      data: `halted (${h.haltClass}): ${h.message}`.slice(0, 1000),
      attempts: Math.max(1, t.attempts),
      ...(shot ? { screenshot_b64: shot.toString('base64') } : {}),
    };
    this.st.steps.push(entry);
    const { screenshot_b64: _shot, ...eventEntry } = entry;
    await this.emit('step.finished', { ...eventEntry, cost_usd: this.st.cost }).catch(() => undefined);
  }

  private async runStep(original: Step, p: string, track: StepTrack): Promise<StepResult> {
    const step = await withRecipe(original, (name) => this.d.recipe(this.run.tenant_id, name));
    await this.progress.started(this.run, this.st.steps, { path: p, type: step.type, intent: step.intent });
    const startedAt = new Date().toISOString();
    const costBefore = this.st.cost;
    const ti = this.st.traced++;
    this.tracing = ti;
    const rec = this.rec;
    // the pre observation of the first step; later steps reuse the previous step's post; the step's first attempt
    // waits for it before acting (beside its read of the page's state)
    const lastShot = this.st.lastShot;
    const pre = rec?.wantsScreenshots ? Promise.resolve(lastShot).then((s) => s ?? this.png()) : undefined;
    rec?.decision(ti, 'planner', 'select', `${step.type}: ${step.intent}`.slice(0, 300), { path: p, type: step.type });
    const handler = this.replay ? this.replay.handler(step, p) : this.d.handler(step.type);
    const effect = handler?.sideEffect && rec ? rec.declareSideEffect(ti, `${step.intent} (${p})`, handler.sideEffect) : '';
    const handled = await this.runHandler(step, p, ti, track, pre);
    const attempts = handled.attempts;
    let result = handled.result;
    track.result = result;
    if (result.halt) {
      rec?.settleSideEffect(effect, false, `halted: ${result.halt.halt_class}`);
      throw new Halt(result.halt.halt_class, result.data ?? result.halt.halt_class, result.halt.error ?? runErrorFor(result.halt.halt_class));
    }
    if (result.finish) this.st.finished = true;

    // rows: typed and checked against the extract block, the recipe and the hints
    let rowCount: number | undefined;
    if (result.success && result.rows) {
      const checked = checkStepRows(step, result.rows, result.excluded_cards);
      rowCount = checked.problem ? 0 : checked.rows.length;
      this.st.placeholders += checked.placeholders;
      this.st.addQuality(checked.quality);
      if (!checked.problem) {
        this.st.rows.push(...checked.rows);
        this.st.csvFields.set(checked.schemaName, checked.columns);
        this.st.csvRows.set(checked.schemaName, [...(this.st.csvRows.get(checked.schemaName) ?? []), ...checked.rows]);
        this.st.extractions.push({ path: p, schema_name: checked.schemaName, entity_name: checked.entityName ?? null, rows: checked.rows.length });
      }
      rec?.decision(ti, 'verifier', 'check', checked.note, { ...checked.quality, entity_name: checked.entityName ?? null });
      if (checked.problem && handler?.checks?.rows) result = { ...result, success: false, failure_class: 'extractor_error', data: `${checked.problem}; ${checked.note}` };
      else if (checked.ruled) result = { ...result, data: [result.data, checked.note].filter(Boolean).join('; ') };
    }

    // the page as the attempt left it (its checks read it, and started the post screenshot), else read now beside
    // the screenshot. A failed step's entry carries the screenshot; otherwise only the trace, the live frame and the
    // next step's pre need it, so the step's event and progress do not wait
    const end = handled.end;
    const shot = end?.shot ?? (rec?.wantsScreenshots || !result.success ? this.png() : Promise.resolve(undefined));
    const [info, post] = await Promise.all([end ?? this.pageInfo(), result.success ? undefined : shot]);
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
      ...replayFields(step),
    };
    if (result.success && result.learned) this.st.learned.set(p, result.learned);
    if (!result.success && post) entry.screenshot_b64 = post.toString('base64');
    this.st.steps.push(entry);
    track.recorded = true;
    if (!result.success) this.st.lastFailureHalt = ((c) => (c === 'required_step_failed' ? undefined : c))(haltClassFor(handler?.haltClass, result.failure_class));
    if (rec) this.st.lastShot = shot;
    this.afterShot(shot, async (post) => {
      if (rec) await recordStep(rec, this.plane, ti, step, entry, result, { startedAt, costUsd: this.st.cost - costBefore, effect, pre: await pre, post });
      await publishFrame(this.d.frames, this.plane, this.run.run_id, p, post);
    });
    this.log(`${p} ${step.type} ${result.success ? 'ok' : `failed (${result.failure_class ?? 'unknown'})`}${result.data ? `: ${result.data.slice(0, 200)}` : ''}`);
    const { screenshot_b64: _shot, ...eventEntry } = entry;
    this.onRun(this.run);
    await this.progress.finished(this.run, this.st.steps, this.st.topIndex, !result.success, { ...eventEntry, cost_usd: this.st.cost });

    if (this.drift.observe(info.url)) throw new Halt('off_source_drift', `more than ${this.run.runtime.off_source_step_budget} consecutive steps outside ${this.run.runtime.pinned_source_url_pattern}`);
    if (!result.success && step.gate) throw new Halt('gate_failed', `gate ${p} did not pass: ${result.data ?? result.failure_class ?? ''}`);
    if (!result.success && step.required) throw new Halt(haltClassFor(handler?.haltClass, result.failure_class), `required step ${p} (${step.type}) failed: ${result.failure_class ?? 'unknown'}`);
    return result;
  }
}
