// The run lifecycle: claims a queued run, opens its plane, walks its steps
// (walker.ts), and ends it exactly once whatever happens: a cancel, the time cap,
// a plane that dies, or a crash. Whatever the run opened is closed on every
// ending, including a plane that finishes opening after the run was stopped.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { abortable, sleep } from '../../shared/abort.ts';
import { runDir, type RunRecord } from '../runs/records.ts';
import type { RunOutcome } from '../runs/runs-service.ts';
import { toCsv } from './extraction.ts';
import { Halt, runnerLost } from './outcome.ts';
import { brainCause, egressCause } from '../runs/failure-help.ts';
import type { PlaneDemand, PlaneLease } from './planes.ts';
import type { RunRecording } from './recording.ts';
import { RunState } from './run-state.ts';
import { Walker } from './walker.ts';
import { describeSave } from './profile-sync.ts';
import { rideOut, ridingOut } from './ride-out.ts';
import { RunClock } from './clock.ts';
import { OperatorWatch, type HumanSide } from './human.ts';
import { learnFrom } from '../replay/service.ts';
import type { RunnerDeps } from './deps.ts';

export { Halt } from './outcome.ts';

export class RunExecutor {
  /** closes of plane leases that finished opening after their run had already ended */
  private readonly lateCloses = new Set<Promise<void>>();
  /** ended runs whose plane is still closing, by run id */
  private readonly closing = new Map<string, Promise<void>>();
  /** ended runs whose profile is still being saved, by run id */
  private readonly saving = new Map<string, Promise<void>>();
  /** ended runs whose trace bundle is still being written, by run id */
  private readonly tracing = new Map<string, Promise<void>>();
  /** how to stop each run executing now, by run id (shutdown halts them all) */
  private readonly running = new Map<string, (h: Halt) => void>();
  /** aborted at shutdown: a run's end stops waiting for an unreachable store */
  private readonly stopping = new AbortController();

  constructor(private readonly d: RunnerDeps) {}

  /** Executes a queued run to its end. Never throws: every failure ends the run. */
  async execute(runId: string): Promise<void> {
    const queued = await this.d.store.load(runId);
    if (!queued || queued.status !== 'queued') return;
    const maxMs = queued.runtime.max_time_minutes * 60_000;
    if (!(await this.d.store.claimForRunner(runId, this.d.owner, this.d.leaseMs))) return;

    const abort = new AbortController();
    const halt = (h: Halt) => {
      if (!abort.signal.aborted) abort.abort(h);
    };
    this.running.set(runId, halt);
    const lease = this.heartbeat(runId, halt);
    const log = this.d.log.child({ run_id: runId, tenant_id: queued.tenant_id });
    // this run's writes ride out a store that is away for a moment, while the lease holds
    const d: RunnerDeps = { ...this.d, store: ridingOut(this.d.store, lease.until, log, () => abort.signal.aborted || this.stopping.signal.aborted) };
    // the cap stops while a person has the page (human.ts)
    const clock = new RunClock();
    const timer = clock.timer(maxMs, () => halt(new Halt('time_cap', `max_time_minutes (${queued.runtime.max_time_minutes}) reached`)));
    const operator = new OperatorWatch();
    const unsubscribe = this.d.store.subscribe(`run:${runId}`, (e) => {
      if (e.type === 'run.cancel_requested') halt(new Halt('cancelled', 'cancelled by a caller'));
      if (e.type === 'takeover_requested' && e.data.reason === 'operator') operator.heard();
    });

    // the run stays queued until a plane is bound: a run waiting for a free agent is not running
    let run: RunRecord = { ...queued, phase: 'starting' };
    const st = new RunState();
    st.topIndex = queued.start_step ?? 0;
    let plane: PlaneLease | undefined;
    // the stored profile is read and opened from now on, beside the plane's placement
    const profile = run.profile_id && this.d.profiles ? this.d.profiles.begin(run.tenant_id, run.profile_id, runId) : undefined;
    let outcome: RunOutcome;
    let walker: Walker | undefined;
    const replay = this.d.replay?.session(run, (type, data) => d.store.emit(run, type, data));
    const recording = await this.d.recorder?.begin(run).catch((err: unknown) => {
      this.d.log.error({ run_id: runId, err: (err as Error)?.message }, 'the run could not start its trace; it runs unrecorded');
      return undefined;
    });
    try {
      await saveOrStop(d, run);
      await d.store.emit(run, 'run.status', { status: 'queued', phase: 'starting' });
      const opened = await this.openPlane(profile ? { ...run, profile } : run, abort.signal, async () => {
        run = { ...run, phase: 'waiting_for_plane', events: [...run.events, `${new Date().toISOString()} waiting for a free ${run.runtime.compute_backend} agent`] };
        await saveOrStop(d, run);
        await d.store.emit(run, 'run.status', { status: 'queued', phase: 'waiting_for_plane' });
      });
      plane = opened;
      opened.lost.then(
        (why) => halt(new Halt('plane_lost', `the compute plane went away: ${why}`)),
        () => undefined,
      );
      run = { ...run, status: 'running', phase: 'running', events: [...run.events, `${new Date().toISOString()} status running`] };
      await saveOrStop(d, run);
      await d.store.emit(run, 'run.status', { status: 'running', phase: 'running', backend: opened.plane.capabilities.backend });
      this.publishLive(run, opened);
      const human = this.humanSide(d, () => run, st, clock, abort.signal, opened, recording, operator);
      const w = (walker = new Walker(d, run, opened.plane, st, abort.signal, (r) => (run = r), opened, recording, human, replay));
      await w.walk(run.plan.steps, 'steps');
      // a stop that came during the last step (cancel, cap, a plane that died) is the run's ending
      w.check();
      const backend = run.runtime.compute_backend;
      outcome = { status: 'succeeded', summary: st.summary(backend), steps: st.steps, unknownPlaceholderRows: st.placeholders, extractionCounts: { ...st.quality }, retriesSpent: st.retriesSpent };
      if (st.steps.length > 0 && st.steps.every((s) => !s.success)) {
        // no step halted the run, yet nothing worked: the run still says why (the last failure's class)
        const h = new Halt(st.lastFailureHalt ?? 'all_steps_failed', 'every executed step failed');
        outcome = { ...outcome, status: 'failed', haltClass: h.haltClass, error: h.error, summary: `${outcome.summary}; ${h.message}`, resumeStep: st.topIndex, cause: egressCause(st.steps) ?? brainCause(st.steps) };
      }
    } catch (err) {
      const reason: unknown = abort.signal.reason;
      // a halt during a step is the step's error; a cancel or a cap is the signal's reason
      const h = err instanceof Halt ? err : reason instanceof Halt ? reason : new Halt('plane_lost', (err as Error)?.message ?? 'internal error');
      if (!(err instanceof Halt) && !(reason instanceof Halt)) this.d.log.error({ run_id: runId, tenant_id: run.tenant_id, err }, 'run crashed');
      this.d.metrics.loopTermination(h.haltClass);
      outcome = {
        status: h.haltClass === 'cancelled' ? 'cancelled' : 'failed',
        haltClass: h.haltClass,
        error: h.error,
        summary: `${st.summary(run.runtime.compute_backend)}; halted: ${h.message}`,
        steps: st.steps,
        unknownPlaceholderRows: st.placeholders,
        extractionCounts: { ...st.quality },
        retriesSpent: st.retriesSpent,
        resumeStep: st.topIndex,
        cause: h.helpCause ?? egressCause(st.steps) ?? brainCause(st.steps),
      };
    } finally {
      this.running.delete(runId);
      timer.clear();
      unsubscribe();
      if (plane) await this.d.liveRuns?.withdraw(run.tenant_id, runId).catch((e: Error) => log.warn({ err: e.message }, 'the run\'s live entry was not removed'));
    }
    if (outcome.status === 'succeeded' && this.d.replay) await learnFrom(this.d.replay, d.store, run, st.learned, replay, log);
    // The plane closes (browser, display, video) while the run's result is
    // recorded, off its critical path; the video route waits for it. A run on a
    // persistent profile waits: its lock is released only once the browser has
    // let go of the profile.
    // the last step's screenshot is taken (and handed to the trace) before its plane goes
    await walker?.settled();
    const closing = plane ? this.closePlane(runId, plane) : undefined;
    // a synced profile is saved after the end, its lock held until then (holdForSave), so the
    // end does not wait for the browser; a profile left on the agent's host waits, as its
    // lock is released at the end and the browser must have let go of it first
    const saves = profile?.synced === true && (await this.d.profiles!.holdForSave(runId).then(() => true, (e: Error) => void log.warn({ err: e.message }, 'the profile could not be held for its save; the end waits for the plane')));
    if (run.profile_id && !saves) await closing;
    try {
      await this.saveArtifacts(run, st);
    } catch (e) {
      this.d.log.error({ run_id: runId, err: (e as Error).message }, 'saving run artifacts failed');
    }
    // The trace bundle is written after the result is recorded, off the run's
    // critical path; shutdown drains it. Its write is tracked before the end
    // commits: a client told of the end at once (the end's commit wakes it
    // before end() returns) asks the trace routes, which wait for it.
    // The end rides out an unreachable store past the lease (the lease is kept while it can
    // be), until shutdown: an end is written only if the run has not ended, and the answer
    // is the record's end, this one or recovery's, which the trace then tells too.
    const ending = rideOut(this.d.store, 'ending the run', () => this.d.store.end(run, { ...outcome, costUsd: st.cost }), { until: () => Infinity, stopped: () => this.stopping.signal.aborted, log });
    if (recording) {
      const written = ending.then(
        (ended) => recording.close({ status: ended.status, halt_class: ended.halt_class, summary: ended.summary ?? '', cost_usd: st.cost }),
        // not ended here: the bundle stays staged, and recovery or the next start commits it with the record's end
        () => undefined,
      );
      track(this.tracing, runId, written, (e) => this.d.log.error({ run_id: runId, err: e.message }, 'trace close failed'));
    }
    try {
      const ended = await ending;
      if (profile && saves) {
        const saved = this.d.profiles!.save(profile, run.profile_id!).then((r) => this.d.store.emit(ended, 'run.profile', describeSave(r)));
        track(this.saving, runId, saved, (e) => log.error({ err: e.message }, 'profile save failed'));
      }
    } catch (err) {
      log.error({ err: (err as Error)?.message }, 'the run\'s end could not be recorded; recovery ends it once the store is back');
      return;
    } finally {
      clearInterval(lease.timer);
    }
    await this.d.store.releaseRunner(runId, this.d.owner).catch(() => undefined);
  }

  /** The run's page can be watched and taken over from any replica from now on; its first screenshot gives the page size. */
  private publishLive(run: RunRecord, lease: PlaneLease): void {
    const live = this.d.liveRuns;
    const ep = lease.endpoint?.();
    if (!live || !ep) return;
    void lease.plane
      .screenshot('jpeg')
      .then((s) => ({ width: s.width, height: s.height }), () => null)
      .then((viewport) => live.publish({ run_id: run.run_id, tenant_id: run.tenant_id, backend: run.runtime.compute_backend, endpoint: ep, viewport, local: () => lease.endpoint?.() }))
      .catch((e: Error) => this.d.log.warn({ run_id: run.run_id, err: e.message }, "the run's live entry was not written; its screen cannot be watched"));
  }

  /** What a step's askHuman needs (human.ts), or undefined when this gateway has no takeover service. */
  private humanSide(d: RunnerDeps, current: () => RunRecord, st: RunState, clock: RunClock, signal: AbortSignal, lease: PlaneLease, rec: RunRecording | undefined, operator: OperatorWatch): HumanSide | undefined {
    const desk = this.d.takeover;
    if (!desk) return undefined;
    // the walker's steps so far go with every save: the run's own copy of them is older
    const withSteps = (r: RunRecord): RunRecord => ({ ...r, steps: st.steps, checkpoint_step: st.topIndex });
    return {
      desk,
      clock,
      signal,
      run: () => withSteps(current()),
      saveAndEmit: async (r, type, data) => {
        if (!(await d.store.saveAndEmit(withSteps(r), d.owner, type, data))) throw runnerLost();
      },
      emit: async (type, data) => {
        if (!(await d.store.emitFenced(current(), d.owner, type, data))) throw runnerLost();
      },
      endpoint: () => lease.endpoint?.(),
      viewport: async () => {
        const s = await lease.plane.screenshot('jpeg').catch(() => undefined);
        return s ? { width: s.width, height: s.height } : null;
      },
      png: () => Promise.race([lease.plane.screenshot().then((x) => x.image, () => undefined), sleep(5000).then(() => undefined)]),
      ...(rec ? { rec } : {}),
      traceIndex: () => Math.max(0, st.traced - 1),
      handled: new Set(),
      operator,
      log: (line) => this.d.log.info({ run_id: current().run_id, tenant_id: current().tenant_id }, line),
    };
  }

  /**
   * Renews this runner's lease on the run every third of the lease. A lease
   * that is gone (the run was recovered elsewhere, or this process stalled past
   * it) stops the run at once: no run is driven by two runners. A store that
   * cannot be reached is tried again until the lease would have run out.
   */
  private heartbeat(runId: string, halt: (h: Halt) => void): { timer: NodeJS.Timeout; until: () => number } {
    let renewedAt = Date.now();
    const lost = (why: string) => halt(new Halt('runner_lost', `this runner lost its lease on the run (${why}); the run was handed to recovery`));
    const timer = setInterval(() => {
      this.d.store.renewRunner(runId, this.d.owner, this.d.leaseMs).then(
        (held) => {
          if (held) renewedAt = Date.now();
          else lost('taken or expired');
        },
        (err: unknown) => {
          this.d.log.warn({ run_id: runId, err: (err as Error)?.message }, 'run lease renewal failed; retrying');
          if (Date.now() - renewedAt >= this.d.leaseMs) lost('not renewed within the lease');
        },
      );
    }, Math.max(500, Math.floor(this.d.leaseMs / 3)));
    timer.unref();
    // the lease is this runner's until then, renewed or not
    return { timer, until: () => renewedAt + this.d.leaseMs };
  }

  /**
   * Opens the run's plane, or throws the halt that stopped the run meanwhile. A lease
   * that arrives after the run was stopped is closed at once: its agent, browser,
   * display and recorder would otherwise outlive the run.
   */
  private async openPlane(run: RunRecord & Pick<PlaneDemand, 'profile'>, signal: AbortSignal, waiting: () => Promise<void>): Promise<PlaneLease> {
    const closeLate = (late: PlaneLease) => {
      const p = late
        .close()
        .catch((e: unknown) => this.d.log.warn({ run_id: run.run_id, err: (e as Error).message }, 'closing a plane opened after its run ended failed'))
        .finally(() => this.lateCloses.delete(p));
      this.lateCloses.add(p);
    };
    try {
      return await abortable(Promise.resolve().then(() => this.d.planes.open(run, signal, { waiting })), signal, closeLate);
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      if (err instanceof Halt) throw err;
      throw new Halt('plane_unavailable', `no ${run.runtime.compute_backend} could be started: ${(err as Error)?.message ?? String(err)}`);
    }
  }

  /** Halts every run executing now (shutdown): each ends with the halt's class and closes its plane. Returns how many. */
  haltAll(h: Halt): number {
    this.stopping.abort();
    const n = this.running.size;
    for (const halt of this.running.values()) halt(h);
    return n;
  }

  /** Waits for the closes of late plane leases and of ended runs' planes (shutdown). */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.lateCloses, ...this.closing.values(), ...this.tracing.values(), ...this.saving.values()]);
  }

  /** The close of an ended run's plane while it is under way (its video is written at the end of it). */
  planeClosing(runId: string): Promise<void> | undefined {
    return this.closing.get(runId);
  }

  /** The write of an ended run's trace bundle while it is under way. */
  traceClosing(runId: string): Promise<void> | undefined {
    return this.tracing.get(runId);
  }

  private closePlane(runId: string, lease: PlaneLease): Promise<void> {
    return track(this.closing, runId, lease.close(), (e) => this.d.log.warn({ run_id: runId, err: e.message }, 'plane close failed'));
  }

  private async saveArtifacts(run: RunRecord, st: RunState): Promise<void> {
    if (st.rows.length === 0 && st.csvRows.size === 0) return;
    const dir = runDir(this.d.dataDir, run);
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'extracted_rows.json'), JSON.stringify(st.rows, null, 2));
    // the rows artifact's metadata: what the rows are (entity_name) and how they were checked
    const meta = { entity_name: st.extractions.find((e) => e.entity_name)?.entity_name ?? null, row_count: st.rows.length, extractions: st.extractions, extraction_quality: { unknown_placeholder_row_count: st.placeholders, ...st.quality } };
    await writeFile(path.join(dir, 'extracted_rows.meta.json'), JSON.stringify(meta, null, 2));
    for (const [name, rows] of st.csvRows) await writeFile(path.join(dir, `${name}.csv`), toCsv(st.csvFields.get(name) ?? [], rows));
  }
}

/** Work an ended run leaves behind, findable by run id until it settles; a failure is logged, never thrown. */
function track(into: Map<string, Promise<void>>, runId: string, work: Promise<unknown>, failed: (e: Error) => void): Promise<void> {
  const p = work
    .then(() => undefined, (e: unknown) => failed(e as Error))
    .finally(() => {
      if (into.get(runId) === p) into.delete(runId);
    });
  into.set(runId, p);
  return p;
}

/** Saves the run through the lease fence; a refused write stops the run before it acts again. */
async function saveOrStop(d: RunnerDeps, run: RunRecord): Promise<void> {
  if (!(await d.store.save(run, d.owner))) throw runnerLost();
}
