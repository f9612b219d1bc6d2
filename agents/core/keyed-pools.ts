// Warm pools kept per key beside the main pool (dom_plane: per geo, the time zone and
// locale a browser was started with, which no context can change without leaking the
// real ones through workers). A key's pool begins with the browser of a session that
// needed it (adopted when the session ends) and keeps one ready for the next session
// with the same key; a pool nobody borrowed from for `idleMs` is closed, and at most
// `max` pools exist (the least recently used idle one gives way).
import { WarmPool } from './pool.ts';

interface Entry<T> {
  pool: WarmPool<T>;
  usedAt: number;
}

export class KeyedPools<T> {
  private readonly pools = new Map<string, Entry<T>>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly max: number,
    private readonly idleMs: number,
    /** makes a fresh item for `key`'s pool (after one is retired) */
    private readonly make: (key: string) => Promise<T>,
    private readonly dispose: (item: T) => Promise<void>,
    private readonly log: (msg: string, fields?: Record<string, unknown>) => void = () => undefined,
  ) {
    this.sweeper = setInterval(() => this.sweep(), Math.max(1000, Math.min(idleMs / 2, 60_000)));
    this.sweeper.unref();
  }

  /** Ready items per key. */
  readyByKey(): Record<string, number> {
    return Object.fromEntries([...this.pools].map(([key, e]) => [key, e.pool.readyCount]));
  }

  /**
   * The pool of `key`, made when there is room (an idle pool may be closed for it), or
   * undefined: the session then uses a browser of its own, closed after it.
   */
  poolFor(key: string): WarmPool<T> | undefined {
    if (this.max < 1) return undefined;
    let e = this.pools.get(key);
    if (!e) {
      if (this.pools.size >= this.max && !this.evictOne()) return undefined;
      e = { pool: new WarmPool<T>(1, () => this.make(key), this.dispose, this.log), usedAt: Date.now() };
      this.pools.set(key, e);
    }
    e.usedAt = Date.now();
    return e.pool;
  }

  private evictOne(): boolean {
    const idle = [...this.pools].filter(([, e]) => e.pool.busyCount === 0).sort((a, b) => a[1].usedAt - b[1].usedAt)[0];
    if (!idle) return false;
    this.drop(idle[0]);
    return true;
  }

  private drop(key: string): void {
    const e = this.pools.get(key);
    if (!e) return;
    this.pools.delete(key);
    void e.pool.close().catch((err: unknown) => this.log('keyed warm pool failed to close', { err: err instanceof Error ? err.message : String(err) }));
  }

  private sweep(): void {
    const now = Date.now();
    for (const [key, e] of this.pools) {
      // in use counts as used: a session longer than idleMs must not find its geo dropped when it ends
      if (e.pool.busyCount > 0) e.usedAt = now;
      else if (now - e.usedAt >= this.idleMs) this.drop(key);
    }
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    const all = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(all.map((e) => e.pool.close()));
  }
}
