// Starts accepted runs, at most `maxActive` at once on this gateway; the rest
// wait in order. Tenant caps are enforced at acceptance; this cap protects the
// machine (each run owns a browser).
import type { Logger } from '../log.ts';
import type { RunExecutor } from './executor.ts';

export class RunScheduler {
  private readonly waiting: Array<{ runId: string; done: () => void }> = [];
  private readonly active = new Set<Promise<void>>();
  private closed = false;

  constructor(
    private readonly executor: RunExecutor,
    private readonly maxActive: number,
    private readonly log: Logger,
  ) {}

  get activeCount(): number {
    return this.active.size;
  }

  /** Starts the run now or when a place frees up; resolves when it has ended (or at once once closed). */
  submit(runId: string): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise<void>((done) => {
      this.waiting.push({ runId, done });
      this.pump();
    });
  }

  private pump(): void {
    while (!this.closed && this.active.size < this.maxActive && this.waiting.length > 0) {
      const { runId, done } = this.waiting.shift()!;
      const p: Promise<void> = this.executor
        .execute(runId)
        .catch((err: unknown) => this.log.error({ run_id: runId, err }, 'run executor failed'))
        .finally(() => {
          this.active.delete(p);
          done();
          this.pump();
        });
      this.active.add(p);
    }
  }

  /** Stops taking runs and waits for the active ones (their cancellation is the caller's). */
  async close(): Promise<void> {
    this.closed = true;
    // runs that never started stay queued in the store: the next gateway dispatches them
    for (const w of this.waiting.splice(0)) w.done();
    await Promise.allSettled([...this.active]);
  }
}
