// The run's clock: the timers that bound a run (its max_time_minutes, a step's own
// time limit) stop while a person has the page (issue 42), so a run whose cap is
// shorter than the wait for a person still finishes. docs/decisions.md has why.

export interface PausableTimer {
  clear(): void;
}

interface Entry {
  left: number;
  startedAt: number;
  fire: () => void;
  timer: NodeJS.Timeout | undefined;
}

export class RunClock {
  private readonly timers = new Set<Entry>();
  /** how many holds are on (a hold inside a hold keeps the clock stopped until both end) */
  private holds = 0;

  /** `fire` after `ms` of running time (time on hold does not count); unref'd. */
  timer(ms: number, fire: () => void): PausableTimer {
    const e: Entry = { left: ms, startedAt: Date.now(), fire, timer: undefined };
    this.timers.add(e);
    if (this.holds === 0) this.arm(e);
    return {
      clear: () => {
        clearTimeout(e.timer);
        this.timers.delete(e);
      },
    };
  }

  get held(): boolean {
    return this.holds > 0;
  }

  /** Stops every timer until release(). */
  hold(): void {
    if (this.holds++ > 0) return;
    const now = Date.now();
    for (const e of this.timers) {
      clearTimeout(e.timer);
      e.timer = undefined;
      e.left = Math.max(0, e.left - (now - e.startedAt));
    }
  }

  release(): void {
    if (this.holds === 0 || --this.holds > 0) return;
    for (const e of this.timers) this.arm(e);
  }

  private arm(e: Entry): void {
    e.startedAt = Date.now();
    e.timer = setTimeout(() => {
      this.timers.delete(e);
      e.fire();
    }, e.left);
    e.timer.unref();
  }
}
