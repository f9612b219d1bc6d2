// AtomicOps on the embedded store: claims (idempotency keys, profile locks,
// runner leases, tickets) and concurrency slots are rows, so they outlive a
// restart with the runs they belong to. Token buckets stay in memory: a rate
// limit that starts full after a restart loses nothing a caller was promised.
import { MemoryAtomicOps, type AtomicOps, type BucketResult } from '../atomic.ts';
import type { Db } from './db.ts';
import { unsynced } from './group-commit.ts';

const NS = '__atomic';

export class SqliteAtomicOps implements AtomicOps {
  readonly kind = 'sqlite' as const;
  private readonly buckets: MemoryAtomicOps;
  private readonly q;
  private readonly acquireTx;
  private readonly claimTx;

  constructor(
    private readonly db: Db,
    private readonly clock: () => number = Date.now,
  ) {
    this.buckets = new MemoryAtomicOps(clock);
    this.q = {
      held: db.prepare<[string, string], { n: number }>('SELECT 1 AS n FROM slots WHERE key = ? AND holder = ?'),
      // kept by triggers with the slots (migration 002): no scan of the set
      count: db.prepare<[string], { n: number }>('SELECT COALESCE((SELECT n FROM slot_counts WHERE key = ?), 0) AS n'),
      addSlot: db.prepare('INSERT INTO slots (key, holder) VALUES (?, ?)'),
      delSlot: db.prepare('DELETE FROM slots WHERE key = ? AND holder = ?'),
      holders: db.prepare<[string], { holder: string }>('SELECT holder FROM slots WHERE key = ?'),
      get: db.prepare<[string, string, number], { value: string }>('SELECT value FROM kv WHERE namespace = ? AND key = ? AND expires_at > ?'),
      put: db.prepare('INSERT INTO kv (namespace, key, value, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at'),
      delIf: db.prepare('DELETE FROM kv WHERE namespace = ? AND key = ? AND value = ? AND expires_at > ?'),
      renew: db.prepare('UPDATE kv SET expires_at = ? WHERE namespace = ? AND key = ? AND value = ? AND expires_at > ?'),
      sweep: db.prepare('DELETE FROM kv WHERE namespace = ? AND expires_at <= ?'),
      // a range on the primary key: keys are compared byte-wise (BINARY), so [prefix, prefix+U+FFFF) is the prefix
      list: db.prepare<[string, string, string, number], { key: string; value: string }>('SELECT key, value FROM kv WHERE namespace = ? AND key >= ? AND key < ? AND expires_at > ? ORDER BY key'),
    };
    this.acquireTx = db.transaction((key: string, holder: string, max: number): boolean => {
      if (this.q.held.get(key, holder)) return true;
      if (this.q.count.get(key)!.n >= max) return false;
      this.q.addSlot.run(key, holder);
      return true;
    });
    this.claimTx = db.transaction((key: string, value: string, ttlMs: number): string | null => {
      const now = this.clock();
      const existing = this.q.get.get(NS, key, now);
      if (existing) return existing.value;
      this.q.put.run(NS, key, value, now + ttlMs);
      return null;
    });
  }

  takeToken(key: string, capacity: number, refillPerSec: number): Promise<BucketResult> {
    return this.buckets.takeToken(key, capacity, refillPerSec);
  }

  /**
   * Not synced on its own (synchronous NORMAL for this one commit): a slot is
   * taken only by a run's acceptance, whose row commits right after and is not
   * answered before the log's fsync, which carries this commit too. A power cut
   * before it loses a slot whose run was never accepted. One fsync per accepted
   * run instead of two.
   */
  async acquireSlot(key: string, holder: string, max: number): Promise<boolean> {
    return unsynced(this.db, () => this.acquireTx.immediate(key, holder, max));
  }

  async releaseSlot(key: string, holder: string): Promise<boolean> {
    return this.q.delSlot.run(key, holder).changes > 0;
  }

  async slotCount(key: string): Promise<number> {
    return this.q.count.get(key)!.n;
  }

  async slotHolders(key: string): Promise<string[]> {
    return this.q.holders.all(key).map((r) => r.holder);
  }

  async claim(key: string, value: string, ttlMs: number): Promise<string | null> {
    return this.claimTx.immediate(key, value, ttlMs);
  }

  async get(key: string): Promise<string | null> {
    return this.q.get.get(NS, key, this.clock())?.value ?? null;
  }

  async put(key: string, value: string, ttlMs: number): Promise<void> {
    this.q.put.run(NS, key, value, this.clock() + ttlMs);
  }

  async deleteIf(key: string, expected: string): Promise<boolean> {
    return this.q.delIf.run(NS, key, expected, this.clock()).changes > 0;
  }

  async renew(key: string, expected: string, ttlMs: number): Promise<boolean> {
    const now = this.clock();
    return this.q.renew.run(now + ttlMs, NS, key, expected, now).changes > 0;
  }

  async list(prefix: string): Promise<Array<{ key: string; value: string }>> {
    return this.q.list.all(NS, prefix, `${prefix}\uffff`, this.clock());
  }

  /** Drops expired claims (they are already invisible; this keeps the table small). */
  sweep(): number {
    return this.q.sweep.run(NS, this.clock()).changes;
  }

  async close(): Promise<void> {}
}
