// Which job of the suite starts next, and when. `width` jobs always run (the lanes); one
// more may start beside them while the host's cores sit idle. The suite's files spend
// much of their time waiting (a browser's page, a lease, a restart): at two lanes their
// processes used 1.0 of the host's 2 cores on average (34 CPU-minutes in 34 minutes), so
// a fixed third lane would fill the idle half, but at the cost of bursts that took the
// load to 20 and timed files out (docs/decisions.md). The extra lane is taken only when
// the last seconds left at least IDLE_SHARE of the CPU idle, never by a heavy file, and
// at most one start per SETTLE_MS, so a burst is seen before the next start.
import { readFileSync } from 'node:fs';

export interface PoolJob {
  /** runs of one of the heavy files: never two at once, never in the extra lane */
  heavy?: boolean;
}

/** The share of CPU time the host left idle since the previous reading (/proc/stat); undefined off Linux or on the first reading. */
export class IdleMeter {
  private last: { idle: number; total: number } | undefined;

  constructor(private readonly read: () => string = () => readFileSync('/proc/stat', 'utf8')) {}

  sample(): number | undefined {
    let now: { idle: number; total: number };
    try {
      const f = this.read().split('\n', 1)[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
      if (f.length < 8 || !f.every(Number.isFinite)) return undefined;
      // user nice system idle iowait irq softirq steal: idle and iowait are time nobody computed
      now = { idle: f[3]! + f[4]!, total: f.reduce((a, b) => a + b, 0) };
    } catch {
      return undefined;
    }
    const prev = this.last;
    this.last = now;
    if (!prev || now.total <= prev.total) return undefined;
    return (now.idle - prev.idle) / (now.total - prev.total);
  }
}

export interface PoolState {
  running: number;
  heavyRunning: boolean;
  /** the host's idle share over the last reading, if known */
  idle: number | undefined;
  /** ms since an extra-lane start (Infinity when none) */
  sinceExtra: number;
}

export const IDLE_SHARE = 0.45;
export const SETTLE_MS = 15_000;

/**
 * The index in `queue` (longest first) of the job to start now, and whether it takes the
 * extra lane; undefined when none may start. `extra`: how many jobs may run beyond `width`.
 */
export function pick(queue: readonly PoolJob[], width: number, extra: number, s: PoolState): { at: number; extra: boolean } | undefined {
  if (s.running < width) {
    const at = queue.findIndex((j) => !(j.heavy && s.heavyRunning));
    return at < 0 ? undefined : { at, extra: false };
  }
  if (s.running >= width + extra || s.idle === undefined || s.idle < IDLE_SHARE || s.sinceExtra < SETTLE_MS) return undefined;
  const at = queue.findIndex((j) => !j.heavy);
  return at < 0 ? undefined : { at, extra: true };
}
