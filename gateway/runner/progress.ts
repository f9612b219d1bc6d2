// A run's saved progress as the walker writes it. The checkpoint of a top-level
// step rides with that step's step.started, and the periodic save with a
// step.finished: one write each (one commit, one fsync on SQLite) where a save
// and an event took two. Every write is fenced by the runner's lease, events
// between saves too: a runner that lost its run stops at the write, and its
// event is not appended.
import type { RunRecord } from '../runs/records.ts';
import type { RunnerStore } from './deps.ts';
import { runnerLost } from './outcome.ts';
import type { StepEntry } from './run-state.ts';

/** Progress (steps so far) is saved at most this often; a failed step and the run's end are saved at once. */
export const SAVE_EVERY_MS = 1000;

export class RunProgress {
  private savedAt = 0;
  /** the top-level step whose checkpoint waits for that step's step.started */
  private checkpoint: number | undefined;

  constructor(
    private readonly store: Pick<RunnerStore, 'save' | 'emitFenced' | 'saveAndEmit'>,
    private readonly owner: string,
  ) {}

  /** The fenced save: a runner that lost the run stops here, before its next action. */
  async save(r: RunRecord): Promise<void> {
    if (!(await this.store.save(r, this.owner))) throw runnerLost();
  }

  /**
   * Top-level step `i` is next: where recovery points a resume if this runner
   * dies during it. Saved with its step.started, or at once for a step that
   * emits none (`now`: a loop).
   */
  async checkpointAt(r: RunRecord, steps: StepEntry[], i: number, now: boolean): Promise<void> {
    this.checkpoint = undefined;
    if (now) await this.save({ ...r, steps, checkpoint_step: i });
    else this.checkpoint = i;
  }

  /** step.started, with the checkpoint waiting for it, if any. */
  async started(r: RunRecord, steps: StepEntry[], data: Record<string, unknown>): Promise<void> {
    const i = this.checkpoint;
    this.checkpoint = undefined;
    if (i === undefined) return this.emit(r, 'step.started', data);
    await this.saveAndEmit({ ...r, steps, checkpoint_step: i }, 'step.started', data);
  }

  /** step.finished, with a save of the progress when the step failed or a save is due. */
  async finished(r: RunRecord, steps: StepEntry[], checkpoint: number, failed: boolean, data: Record<string, unknown>): Promise<void> {
    if (!failed && Date.now() - this.savedAt < SAVE_EVERY_MS) return this.emit(r, 'step.finished', data);
    this.savedAt = Date.now();
    await this.saveAndEmit({ ...r, steps, checkpoint_step: checkpoint }, 'step.finished', data);
  }

  /** An event between saves, fenced as they are. */
  async emit(r: RunRecord, type: string, data: Record<string, unknown>): Promise<void> {
    if (!(await this.store.emitFenced(r, this.owner, type, data))) throw runnerLost();
  }

  private async saveAndEmit(r: RunRecord, type: string, data: Record<string, unknown>): Promise<void> {
    if (!(await this.store.saveAndEmit(r, this.owner, type, data))) throw runnerLost();
  }
}
