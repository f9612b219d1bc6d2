// Operations that must be exact across gateway replicas: the token bucket, the
// concurrency slots and claim-once keys. In memory for the embedded default,
// in Redis (one Lua script per operation) when SERVICE_REDIS_URL is set.

export interface BucketResult {
  allowed: boolean;
  /** tokens left after this take, fractional */
  tokens: number;
  /** milliseconds since epoch, as seen by the limiter's clock */
  nowMs: number;
}

export interface AtomicOps {
  readonly kind: 'memory' | 'redis' | 'sqlite' | 'postgres';
  /** Take one token from a bucket of `capacity` refilled at `refillPerSec`. */
  takeToken(key: string, capacity: number, refillPerSec: number): Promise<BucketResult>;
  /**
   * Add `holder` to the slot set when fewer than `max` are held; re-adding a holder is a no-op success.
   * For a run's acceptance only: on SQLite it is not fsynced by itself, the run row's commit that follows is.
   */
  acquireSlot(key: string, holder: string, max: number): Promise<boolean>;
  /** Remove `holder`; true only for the call that actually removed it. */
  releaseSlot(key: string, holder: string): Promise<boolean>;
  slotCount(key: string): Promise<number>;
  /** Who holds the slot set's slots (a tenant's concurrency cap: a handful), in no particular order. */
  slotHolders(key: string): Promise<string[]>;
  /** Set key to value unless it exists; returns null when this call set it, else the existing value. */
  claim(key: string, value: string, ttlMs: number): Promise<string | null>;
  get(key: string): Promise<string | null>;
  put(key: string, value: string, ttlMs: number): Promise<void>;
  /** Delete key only if it still holds `expected` (so a late caller cannot drop another's claim). */
  deleteIf(key: string, expected: string): Promise<boolean>;
  /** Extend key's expiry to ttlMs from now only if it still holds `expected` and has not expired (a lease's heartbeat). */
  renew(key: string, expected: string, ttlMs: number): Promise<boolean>;
  /** The live keys starting with `prefix` and their values (small registries: the plane agents that announced themselves). */
  list(prefix: string): Promise<Array<{ key: string; value: string }>>;
  close(): Promise<void>;
}

interface Bucket {
  tokens: number;
  ts: number;
}

export class MemoryAtomicOps implements AtomicOps {
  readonly kind = 'memory' as const;
  private buckets = new Map<string, Bucket>();
  private slots = new Map<string, Set<string>>();
  private values = new Map<string, { value: string; expiresAt: number }>();

  constructor(private readonly clock: () => number = Date.now) {}

  async takeToken(key: string, capacity: number, refillPerSec: number): Promise<BucketResult> {
    const now = this.clock();
    const b = this.buckets.get(key) ?? { tokens: capacity, ts: now };
    const tokens = Math.min(capacity, b.tokens + ((now - b.ts) / 1000) * refillPerSec);
    const allowed = tokens >= 1;
    const left = allowed ? tokens - 1 : tokens;
    this.buckets.set(key, { tokens: left, ts: now });
    return { allowed, tokens: left, nowMs: now };
  }

  async acquireSlot(key: string, holder: string, max: number): Promise<boolean> {
    const set = this.slots.get(key) ?? new Set<string>();
    if (set.has(holder)) return true;
    if (set.size >= max) return false;
    set.add(holder);
    this.slots.set(key, set);
    return true;
  }

  async releaseSlot(key: string, holder: string): Promise<boolean> {
    return this.slots.get(key)?.delete(holder) ?? false;
  }

  async slotCount(key: string): Promise<number> {
    return this.slots.get(key)?.size ?? 0;
  }

  async slotHolders(key: string): Promise<string[]> {
    return [...(this.slots.get(key) ?? [])];
  }

  private live(key: string): string | null {
    const v = this.values.get(key);
    if (!v) return null;
    if (v.expiresAt <= this.clock()) {
      this.values.delete(key);
      return null;
    }
    return v.value;
  }

  async claim(key: string, value: string, ttlMs: number): Promise<string | null> {
    const existing = this.live(key);
    if (existing !== null) return existing;
    this.values.set(key, { value, expiresAt: this.clock() + ttlMs });
    return null;
  }

  async get(key: string): Promise<string | null> {
    return this.live(key);
  }

  async put(key: string, value: string, ttlMs: number): Promise<void> {
    this.values.set(key, { value, expiresAt: this.clock() + ttlMs });
  }

  async deleteIf(key: string, expected: string): Promise<boolean> {
    if (this.live(key) !== expected) return false;
    this.values.delete(key);
    return true;
  }

  async renew(key: string, expected: string, ttlMs: number): Promise<boolean> {
    const v = this.values.get(key);
    if (this.live(key) !== expected || !v) return false;
    v.expiresAt = this.clock() + ttlMs;
    return true;
  }

  async list(prefix: string): Promise<Array<{ key: string; value: string }>> {
    const out: Array<{ key: string; value: string }> = [];
    for (const key of [...this.values.keys()]) {
      const value = key.startsWith(prefix) ? this.live(key) : null;
      if (value !== null) out.push({ key, value });
    }
    return out;
  }

  async close(): Promise<void> {}
}

/** The lock of a tenant's profile (`tenant/profile`), held by one run or browser session at a time. */
export const profileLockKey = (tenantProfile: string): string => `profile:${tenantProfile}`;
/**
 * Set (with a short, renewed TTL) while an ended run or session still saves its profile:
 * its lock is not released at the end, and the holder does not count as ended, so the
 * next run of the profile waits for the newest version (profile_busy meanwhile).
 */
export const profileSavingKey = (holder: string): string => `profile-saving:${holder}`;

/**
 * Waits (at most `maxMs`) while `holder` saves its profile; true when it did wait. The
 * next run of a profile then starts from the version just saved instead of answering
 * profile_busy for the half second a save takes.
 */
export async function waitWhileSaving(atomic: AtomicOps, holder: string, maxMs = 30_000): Promise<boolean> {
  const until = Date.now() + maxMs;
  let waited = false;
  while ((await atomic.get(profileSavingKey(holder))) !== null) {
    if (Date.now() >= until) break;
    waited = true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return waited;
}
