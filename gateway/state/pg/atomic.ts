// AtomicOps on PostgreSQL: every operation is one statement (or one short
// transaction under a row or advisory lock), so limits hold exactly across the
// replicas that share the database, and claims, leases and slots outlive any
// replica. Time is the database server's clock.
import type { AtomicOps, BucketResult } from '../atomic.ts';
import type { Pool } from './db.ts';
import { NOW_MS } from './tables.ts';

const NS = '__atomic';

export class PgAtomicOps implements AtomicOps {
  readonly kind = 'postgres' as const;

  constructor(private readonly pool: Pool) {}

  async takeToken(key: string, capacity: number, refillPerSec: number): Promise<BucketResult> {
    // one upsert: its row lock serializes the takers of one bucket
    const refilled = `LEAST($2::double precision, buckets.tokens + GREATEST(0, ${NOW_MS} - buckets.ts) / 1000.0 * $3::double precision)`;
    const { rows } = await this.pool.query<{ allowed: boolean; tokens: number; ts: string }>(
      `INSERT INTO buckets (key, tokens, ts, allowed)
         VALUES ($1, GREATEST($2::double precision - 1, 0), ${NOW_MS}, $2::double precision >= 1)
       ON CONFLICT (key) DO UPDATE SET
         tokens = CASE WHEN ${refilled} >= 1 THEN ${refilled} - 1 ELSE ${refilled} END,
         allowed = ${refilled} >= 1,
         ts = ${NOW_MS}
       RETURNING allowed, tokens, ts`,
      [key, capacity, refillPerSec],
    );
    const r = rows[0]!;
    return { allowed: r.allowed, tokens: Number(r.tokens), nowMs: Number(r.ts) };
  }

  async acquireSlot(key: string, holder: string, max: number): Promise<boolean> {
    // one statement: the lock, the count and the insert are one step for every replica (migration 002)
    const { rows } = await this.pool.query<{ ok: boolean }>('SELECT runplane_acquire_slot($1, $2, $3) AS ok', [key, holder, max]);
    return rows[0]!.ok;
  }

  async releaseSlot(key: string, holder: string): Promise<boolean> {
    return ((await this.pool.query('DELETE FROM slots WHERE key = $1 AND holder = $2', [key, holder])).rowCount ?? 0) > 0;
  }

  async slotCount(key: string): Promise<number> {
    // kept by a trigger with the slots (migration 003): no scan of the set
    const { rows } = await this.pool.query<{ n: string }>('SELECT COALESCE((SELECT n FROM slot_counts WHERE key = $1), 0) AS n', [key]);
    return Number(rows[0]!.n);
  }

  async slotHolders(key: string): Promise<string[]> {
    const { rows } = await this.pool.query<{ holder: string }>('SELECT holder FROM slots WHERE key = $1', [key]);
    return rows.map((r) => r.holder);
  }

  async claim(key: string, value: string, ttlMs: number): Promise<string | null> {
    for (let attempt = 0; attempt < 3; attempt++) {
      // takes the key when it is absent or expired
      const took = await this.pool.query(
        `INSERT INTO kv (namespace, key, value, expires_at) VALUES ($1, $2, $3, ${NOW_MS} + $4::bigint)
         ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at WHERE kv.expires_at <= ${NOW_MS}`,
        [NS, key, value, ttlMs],
      );
      if (took.rowCount) return null;
      const held = await this.get(key);
      if (held !== null) return held;
      // expired between the two statements: try again
    }
    throw new Error('claim did not settle');
  }

  async get(key: string): Promise<string | null> {
    const { rows } = await this.pool.query<{ value: string }>(`SELECT value FROM kv WHERE namespace = $1 AND key = $2 AND expires_at > ${NOW_MS}`, [NS, key]);
    return rows[0]?.value ?? null;
  }

  async put(key: string, value: string, ttlMs: number): Promise<void> {
    await this.pool.query(
      `INSERT INTO kv (namespace, key, value, expires_at) VALUES ($1, $2, $3, ${NOW_MS} + $4::bigint)
       ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`,
      [NS, key, value, ttlMs],
    );
  }

  async deleteIf(key: string, expected: string): Promise<boolean> {
    const r = await this.pool.query(`DELETE FROM kv WHERE namespace = $1 AND key = $2 AND value = $3 AND expires_at > ${NOW_MS}`, [NS, key, expected]);
    return (r.rowCount ?? 0) > 0;
  }

  async renew(key: string, expected: string, ttlMs: number): Promise<boolean> {
    const r = await this.pool.query(
      `UPDATE kv SET expires_at = ${NOW_MS} + $4::bigint WHERE namespace = $1 AND key = $2 AND value = $3 AND expires_at > ${NOW_MS}`,
      [NS, key, expected, ttlMs],
    );
    return (r.rowCount ?? 0) > 0;
  }

  async list(prefix: string): Promise<Array<{ key: string; value: string }>> {
    // starts_with, not LIKE or a range: right under any collation and for keys holding % or _
    const { rows } = await this.pool.query<{ key: string; value: string }>(`SELECT key, value FROM kv WHERE namespace = $1 AND starts_with(key, $2) AND expires_at > ${NOW_MS} ORDER BY key`, [NS, prefix]);
    return rows;
  }

  /** Drops expired claims (already invisible; keeps the table small). */
  async sweep(): Promise<number> {
    return (await this.pool.query(`DELETE FROM kv WHERE namespace = $1 AND expires_at <= ${NOW_MS}`, [NS])).rowCount ?? 0;
  }

  async close(): Promise<void> {}
}
