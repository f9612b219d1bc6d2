// Starts accepted runs, at most `maxActive` at once on this gateway; the rest
// wait in order. Tenant caps are enforced at acceptance; this cap protects the
// machine (each run owns a browser).
import type { Logger } from '../log.ts';
import type { RunExecutor } from './executor.ts';

export class RunScheduler {
  private readonly waiting: string[] = [];
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

  /** Whether one more run would start now rather than wait. */
  hasRoom(): boolean {
    return !this.closed && this.active.size + this.waiting.length < this.maxActive;
  }

  submit(runId: string): void {
    if (this.closed) return;
    this.waiting.push(runId);
    this.pump();
  }

  private pump(): void {
    while (!this.closed && this.active.size < this.maxActive && this.waiting.length > 0) {
      const runId = this.waiting.shift()!;
      const p: Promise<void> = this.executor
        .execute(runId)
        .catch((err: unknown) => this.log.error({ run_id: runId, err }, 'run executor failed'))
        .finally(() => {
          this.active.delete(p);
          this.pump();
        });
      this.active.add(p);
    }
  }

  /** Stops taking runs and waits for the active ones (their cancellation is the caller's). */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.active]);
  }
}
