// Hands accepted runs to a runner. In memory, to this process's scheduler. On
// Redis, through BullMQ: every runner replica runs a worker that takes a run
// when it has room and holds the job (its lock renewed by BullMQ) until the run
// ends; a job whose worker died stalls and BullMQ hands it to another worker.
// The queue is never the truth: the run's row in the store of record is, and
// its runner's lease makes it execute once (gateway/runs/recovery.ts dispatches
// again what the queue lost). The BullMQ queue is in bull-queue.ts, loaded
// only by a replica with Redis (bullmq takes ~0.5 s to load).

export interface RunQueue {
  push(runId: string): Promise<void>;
  /** this replica's runner: `take` executes one run and resolves when it has ended; at most `concurrency` at once */
  consume(take: (runId: string) => Promise<void>, concurrency: number): void;
  close(): Promise<void>;
}

export class MemoryRunQueue implements RunQueue {
  private take: ((runId: string) => Promise<void>) | undefined;

  async push(runId: string): Promise<void> {
    void this.take?.(runId);
  }

  consume(take: (runId: string) => Promise<void>): void {
    this.take = take;
  }

  async close(): Promise<void> {
    this.take = undefined;
  }
}
