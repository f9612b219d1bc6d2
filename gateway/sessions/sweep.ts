// Nobody may be looking at a session whose owner died: no client, no GET, no new run of
// its tenant asking for the slot it holds. The sweep looks for them, so such a session is
// adopted by a living replica (its idle timeout and maximum duration count again) or ended
// gateway_lost with its slot and profile lock freed, within one interval, whoever asks.
// Every replica sweeps; the owner lease decides between them (adoption.ts).
import type { Logger } from '../log.ts';
import type { KeyedStore } from '../state/tables.ts';
import type { SessionRecord } from './records.ts';

export interface SweepOptions {
  store: KeyedStore<SessionRecord>;
  /** adopts or ends `r` when its owner is gone; leaves it as it is otherwise */
  look(r: SessionRecord): Promise<SessionRecord>;
  log: Logger;
  intervalMs: number;
}

export class SessionSweep {
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  /** rows found ended: an end is final, so they are never read again */
  private readonly ended = new Set<string>();

  constructor(private readonly o: SweepOptions) {}

  /** Sweeps now (what a replica that restarted left behind) and then every intervalMs. */
  start(): void {
    void this.sweep();
    this.timer = setInterval(() => void this.sweep(), this.o.intervalMs);
    this.timer.unref();
  }

  /** One pass; never throws (a store that is away is tried again next time). */
  sweep(): Promise<void> {
    this.sweeping ??= this.pass()
      .catch((err: unknown) => this.o.log.warn({ err: (err as Error)?.message }, 'session sweep failed; trying again'))
      .finally(() => (this.sweeping = undefined));
    return this.sweeping;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.sweeping;
  }

  private async pass(): Promise<void> {
    for (const key of await this.o.store.keys()) {
      if (this.ended.has(key)) continue;
      const r = await this.o.store.get(key);
      if (!r) continue;
      const now = r.status === 'ended' ? r : await this.o.look(r);
      if (now.status === 'ended') this.ended.add(key);
    }
  }
}
