// The run queue on Redis, through BullMQ (run-queue.ts says why and how).
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import type { RunQueue } from './run-queue.ts';

const NAME = 'runplane-runs';

export interface BullQueueOptions {
  /** the first error of each outage (not one per retry) */
  onError(err: Error): void;
  /** the worker works again after an outage */
  onRecovered(): void;
  /** how long a job's lock lasts without renewal: a dead worker's job stalls after it */
  lockMs: number;
}

export class BullRunQueue implements RunQueue {
  private readonly connections: Redis[] = [];
  private readonly queue: Queue;
  private worker: Worker | undefined;
  private failing = false;

  constructor(
    private readonly url: string,
    private readonly o: BullQueueOptions,
  ) {
    // fail fast while Redis is away (the run stays queued in the store and is dispatched again), never queue commands in memory
    this.queue = new Queue(NAME, { connection: this.connection({ enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: 3000 }) });
    this.queue.on('error', (err) => this.failed(err));
  }

  private connection(extra: Record<string, unknown>): Redis {
    const c = new Redis(this.url, { lazyConnect: false, connectTimeout: 2000, retryStrategy: (n: number) => Math.min(50 * 2 ** n, 2000), ...extra });
    c.on('error', () => undefined);
    this.connections.push(c);
    return c;
  }

  private failed(err: Error): void {
    if (!this.failing) this.o.onError(err);
    this.failing = true;
  }

  async push(runId: string): Promise<void> {
    // the run id is the job id: a run handed over twice (recovery, a retry) is one job while it waits or runs
    await this.queue.add('run', { run_id: runId }, { jobId: runId, removeOnComplete: true, removeOnFail: true, attempts: 1 });
  }

  consume(take: (runId: string) => Promise<void>, concurrency: number): void {
    this.worker = new Worker(
      NAME,
      async (job) => {
        if (this.failing) {
          this.failing = false;
          this.o.onRecovered();
        }
        await take(String((job.data as { run_id: string }).run_id));
      },
      {
        connection: this.connection({ maxRetriesPerRequest: null }),
        concurrency,
        lockDuration: this.o.lockMs,
        stalledInterval: this.o.lockMs,
        // a stalled run job is handed over once more; the runner's lease decides whether anything runs
        maxStalledCount: 1,
      },
    );
    this.worker.on('error', (err) => this.failed(err));
  }

  async close(): Promise<void> {
    // force: the runs still executing are the shutdown's to halt; their jobs stall and are dropped by the next worker
    await this.worker?.close(true).catch(() => undefined);
    await this.queue.close().catch(() => undefined);
    for (const c of this.connections) c.disconnect();
  }
}
