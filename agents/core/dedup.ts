// step_id idempotency cache (spec: 30 s TTL, 1000 entries). A retry that arrives while
// the first call is still running joins it, so an action never runs twice. Failures
// are not cached: the entry is dropped so a later retry may run the action again.
export interface DedupOptions {
  ttlMs?: number;
  capacity?: number;
  now?: () => number;
}

interface Entry<T> {
  expiresAt: number;
  promise: Promise<T>;
}

export class StepCache<T> {
  private readonly entries = new Map<string, Entry<T>>();
  private readonly ttlMs: number;
  private readonly capacity: number;
  private readonly now: () => number;

  constructor(opts: DedupOptions = {}) {
    this.ttlMs = opts.ttlMs ?? 30_000;
    this.capacity = opts.capacity ?? 1000;
    this.now = opts.now ?? Date.now;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Runs `fn` once per key within the TTL; `deduplicated` tells whether this caller reused a result. */
  async run(key: string, fn: () => Promise<T>): Promise<{ value: T; deduplicated: boolean }> {
    const now = this.now();
    const hit = this.entries.get(key);
    if (hit && hit.expiresAt > now) return { value: await hit.promise, deduplicated: true };
    if (hit) this.entries.delete(key);
    const promise = fn();
    this.entries.set(key, { expiresAt: now + this.ttlMs, promise });
    this.evict(now);
    promise.catch(() => {
      if (this.entries.get(key)?.promise === promise) this.entries.delete(key);
    });
    return { value: await promise, deduplicated: false };
  }

  clear(): void {
    this.entries.clear();
  }

  private evict(now: number): void {
    for (const [k, e] of this.entries) {
      if (this.entries.size <= this.capacity && e.expiresAt > now) break;
      if (e.expiresAt <= now || this.entries.size > this.capacity) this.entries.delete(k);
    }
  }
}
