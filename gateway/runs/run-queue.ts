// Hands accepted runs to a runner. In memory, to this process's scheduler. On
// Redis, to a list every runner replica pops from when it has room, so a run
// accepted by an edge-only replica (SERVICE_RUNNER=off) or a busy one is
// executed wherever there is capacity. The runner's claim on the run record
// (a lease in Redis) makes a run execute once even if two replicas saw it.
import { redisClient, type RedisClient } from '../state/redis-client.ts';

export interface RunQueue {
  push(runId: string): Promise<void>;
  /** this replica's runner: `take` is called with each run it pops, only while `hasRoom()` */
  consume(take: (runId: string) => void, hasRoom: () => boolean): void;
  close(): Promise<void>;
}

export class MemoryRunQueue implements RunQueue {
  private take: ((runId: string) => void) | undefined;

  async push(runId: string): Promise<void> {
    this.take?.(runId);
  }

  consume(take: (runId: string) => void): void {
    this.take = take;
  }

  async close(): Promise<void> {
    this.take = undefined;
  }
}

const KEY = 'runplane:runs:queue';

export class RedisRunQueue implements RunQueue {
  private readonly pusher: RedisClient;
  private popper: RedisClient | undefined;
  private closed = false;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly url: string,
    /** the first error of each outage (not one per retry) */
    private readonly onError: (err: Error) => void,
    /** the pop loop works again after an outage */
    private readonly onRecovered: () => void = () => undefined,
  ) {
    this.pusher = redisClient(url);
  }

  async open(): Promise<this> {
    await this.pusher.connect();
    return this;
  }

  async push(runId: string): Promise<void> {
    await this.pusher.lPush(KEY, runId);
  }

  consume(take: (runId: string) => void, hasRoom: () => boolean): void {
    // a blocking pop holds its connection: the consumer gets its own
    const popper = redisClient(this.url);
    this.popper = popper;
    this.loop = (async () => {
      await popper.connect();
      // while Redis is away the client reconnects on its own; the loop keeps trying and resumes with it
      let failing = false;
      while (!this.closed) {
        if (!hasRoom()) {
          await new Promise((r) => setTimeout(r, 100));
          continue;
        }
        try {
          const got = await popper.brPop(KEY, 1);
          if (failing) {
            failing = false;
            this.onRecovered();
          }
          if (got && !this.closed) take(got.element);
          else if (got) await this.pusher.rPush(KEY, got.element); // closing: put it back for another replica
        } catch (err) {
          if (this.closed) break;
          if (!failing) this.onError(err as Error);
          failing = true;
          await new Promise((r) => setTimeout(r, 500));
        }
      }
    })().catch((err: unknown) => this.onError(err as Error));
  }

  async close(): Promise<void> {
    this.closed = true;
    // close() does not wait for a Redis that went away (quit() would); the pop loop ends within its 1 s block
    for (const c of [this.popper, this.pusher]) if (c?.isOpen) await c.close().catch(() => undefined);
    await this.loop;
  }
}
