// Recovery: no run stays queued or running forever. A runner holds a lease on
// each run it executes (runner:<run_id>, renewed by its heartbeat); a sweep on
// every gateway finds runs whose lease is gone and ends them failed with halt
// class runner_lost and a resume pointer (the rule is in docs/decisions.md: a
// run is never silently re-executed, since its steps may have submitted a form
// or called a tool). Queued runs the dispatch lost (a restart of the embedded
// gateway, a replica that popped a run and died) are handed to the queue again.
import type { Logger } from '../log.ts';
import { profileSavingKey, type AtomicOps } from '../state/atomic.ts';
import type { RunRecorder } from '../runner/recording.ts';
import { recordedFromEntry } from '../runner/recording.ts';
import type { StepEntry } from '../runner/run-state.ts';
import type { RunRecord } from './records.ts';
import type { RunsService } from './runs-service.ts';
import { ownerIsDead, runnerKey } from './owners.ts';

export const RUNNER_LOST = 'runner_lost';

export interface RecoveryOptions {
  runs: RunsService;
  atomic: AtomicOps;
  /** hands a queued run to the dispatch again */
  requeue(runId: string): Promise<void>;
  log: Logger;
  /** how often to sweep */
  intervalMs: number;
  /** a queued run unclaimed for longer than this is handed to the dispatch again */
  queuedGraceMs: number;
  /** where a recovered run's trace is written (the dead runner never closed it) */
  recorder?: RunRecorder;
}

export class RunRecovery {
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  /** when each queued run was last handed to the dispatch by this sweeper */
  private readonly requeuedAt = new Map<string, number>();

  constructor(private readonly o: RecoveryOptions) {}

  /** Sweeps now (the start-up reconcile: every queued run is handed over again) and then every intervalMs. */
  async start(): Promise<void> {
    await this.sweep(true);
    this.timer = setInterval(() => void this.sweep(false), this.o.intervalMs);
    this.timer.unref();
  }

  /** One pass; never throws (a store that is away is tried again next time). */
  sweep(startup = false): Promise<void> {
    this.sweeping ??= this.pass(startup)
      .catch((err: unknown) => this.o.log.warn({ err: (err as Error)?.message }, 'run recovery sweep failed; trying again'))
      .finally(() => (this.sweeping = undefined));
    return this.sweeping;
  }

  private async pass(startup: boolean): Promise<void> {
    const now = Date.now();
    for (const r of await this.o.runs.unfinished()) {
      const holder = await this.o.atomic.get(runnerKey(r.run_id));
      const orphaned = holder === null || ownerIsDead(holder);
      if (!orphaned) continue;
      if (r.status === 'running') await this.recover(r, holder);
      else if (r.status === 'queued') {
        const age = now - Math.max(Date.parse(r.created_at), this.requeuedAt.get(r.run_id) ?? 0);
        if (startup || age >= this.o.queuedGraceMs) {
          this.requeuedAt.set(r.run_id, now);
          if (holder !== null) await this.o.atomic.deleteIf(runnerKey(r.run_id), holder);
          await this.o.requeue(r.run_id);
        }
      }
    }
    for (const id of this.requeuedAt.keys()) if (now - this.requeuedAt.get(id)! > 10 * this.o.queuedGraceMs) this.requeuedAt.delete(id);
    // a profile save whose gateway died (its mark names the saver): the stored version is whole (the index moves
    // only after the blob is written), so the ended holder lets go of the profile's lock now, not when the mark expires
    for (const m of await this.o.atomic.list(profileSavingKey(''))) {
      if (!ownerIsDead(m.value)) continue;
      await this.o.atomic.deleteIf(m.key, m.value);
      this.o.log.warn({ holder: m.key.slice(profileSavingKey('').length) }, 'profile save abandoned: its gateway is gone; the stored version stays and the profile is free');
    }
  }

  /** Ends a run whose runner is gone: failed, runner_lost, resumable from its last checkpoint. */
  private async recover(r: RunRecord, holder: string | null): Promise<void> {
    // one sweeper recovers a run, however many replicas sweep
    if ((await this.o.atomic.claim(`recover:${r.run_id}`, 'x', 60_000)) !== null) return;
    const current = await this.o.runs.load(r.run_id);
    if (!current || current.status !== 'running') return;
    // the record's progress is saved at most once a second; the step events are each in the store
    const done = await finishedSteps(this.o.runs, r.run_id);
    // the record's entries first (a failed step's keeps its screenshot), then those only the events have
    const steps = [...current.steps, ...done.slice(current.steps.length)];
    const resumeStep = Math.max(current.checkpoint_step ?? current.start_step ?? 0, done.reduce((at, e) => (e.success ? Math.max(at, topLevelIndex(e.path) + 1) : at), 0));
    await this.o.runs.emit(current, 'run.recovered', { rule: 'ended', halt_class: RUNNER_LOST, resume_step: resumeStep, previous_runner: holder });
    this.o.log.warn({ run_id: r.run_id, tenant_id: r.tenant_id, previous_runner: holder, resume_step: resumeStep }, 'run recovered: its runner is gone');
    const ended = await this.o.runs.end(current, {
      status: 'failed',
      haltClass: RUNNER_LOST,
      error: RUNNER_LOST,
      summary: `${current.summary ? `${current.summary}; ` : ''}the runner executing this run went away (crash or lost lease) at top-level step ${resumeStep}`,
      steps,
      resumeStep,
    });
    if (holder !== null) await this.o.atomic.deleteIf(runnerKey(r.run_id), holder);
    if (ended.halt_class === RUNNER_LOST) await this.trace(ended, holder, resumeStep);
  }

  /**
   * The recovery in the run's trace: the dead runner never closed its bundle, so
   * one is written with the steps the run record holds, a recovery decision and
   * the halt. Never throws: the run's record is the truth.
   */
  private async trace(run: RunRecord, holder: string | null, resumeStep: number): Promise<void> {
    // a runner of this process still records the run (its lease lapsed while the store was away): its trace tells this end
    if (this.o.recorder?.recording?.(run.run_id)) return;
    const note = `run recovered: its runner went away; ended ${RUNNER_LOST}, resumable from top-level step ${resumeStep}`;
    // the dead runner's own staged bundle (its screenshots) is committed when there is one
    if (await this.o.recorder?.finishStaged?.(run, note).catch(() => false)) return;
    const rec = await this.o.recorder?.begin(run).catch(() => undefined);
    if (!rec) return;
    rec.decision(null, 'recovery', 'note', note, {
      rule: 'ended',
      halt_class: RUNNER_LOST,
      resume_step: resumeStep,
      previous_runner: holder,
    });
    // the record keeps no per-step times: each step is stamped with the run's start
    const at = run.created_at;
    for (const [index, st] of (run.steps as StepEntry[]).entries()) {
      await rec.step(recordedFromEntry(st, index, at), st.screenshot_b64 && rec.wantsScreenshots ? { post: Buffer.from(st.screenshot_b64, 'base64') } : {});
    }
    await rec.close({ status: run.status, halt_class: run.halt_class, summary: run.summary, cost_usd: 0 });
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.sweeping;
  }
}

/** The steps of a run as its step.finished events recorded them (without their screenshots). */
async function finishedSteps(runs: RunsService, runId: string): Promise<StepEntry[]> {
  const events = await runs.history(runId).catch(() => []);
  return events.filter((e) => e.type === 'step.finished').map((e) => {
    const { cost_usd: _cost, ...entry } = e.data as unknown as StepEntry & { cost_usd?: number };
    return entry;
  });
}

/** k for a top-level step's path `steps[k]`; -1 for a step inside a loop or section. */
function topLevelIndex(path: string): number {
  const m = /^steps\[(\d+)\]$/.exec(path);
  return m ? Number(m[1]) : -1;
}
