// Idempotency-Key for run submissions: tenant-scoped, 24 h. The first request
// claims the key atomically (so concurrent duplicates start one run); a repeat
// with the same body gets the first run_id; a repeat with a different body is
// refused with 422, as the IETF Idempotency-Key draft advises.
import { createHash, randomUUID } from 'node:crypto';
import { ServiceError, badRequest } from '../errors.ts';
import type { AtomicOps } from '../state/atomic.ts';

interface Pending {
  state: 'pending';
  hash: string;
  owner: string;
}
interface Done {
  state: 'done';
  hash: string;
  run_id: string;
}
type Entry = Pending | Done;

export type Claim = { kind: 'owner'; complete(runId: string): Promise<void>; abandon(): Promise<void> } | { kind: 'replay'; runId: string };

const KEY_SHAPE = /^[\x21-\x7e]{1,255}$/;

/** JSON with sorted keys, so two equal bodies hash equal whatever their key order. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

export class Idempotency {
  constructor(
    private readonly atomic: AtomicOps,
    private readonly ttlMs: number,
    private readonly waitMs = 10_000,
  ) {}

  async claim(tenantId: string, key: string, body: unknown): Promise<Claim> {
    if (!KEY_SHAPE.test(key)) throw badRequest('Idempotency-Key: must be 1-255 visible ASCII characters');
    const slot = `idem:${tenantId}:${createHash('sha256').update(key).digest('hex')}`;
    const hash = createHash('sha256').update(canonicalJson(body)).digest('hex');
    const mine = JSON.stringify({ state: 'pending', hash, owner: randomUUID() } satisfies Pending);
    const deadline = Date.now() + this.waitMs;
    for (;;) {
      const existing = await this.atomic.claim(slot, mine, this.ttlMs);
      if (existing === null) {
        return {
          kind: 'owner',
          complete: (runId) => this.atomic.put(slot, JSON.stringify({ state: 'done', hash, run_id: runId } satisfies Done), this.ttlMs),
          abandon: async () => {
            await this.atomic.deleteIf(slot, mine);
          },
        };
      }
      const entry = JSON.parse(existing) as Entry;
      if (entry.hash !== hash) {
        throw new ServiceError('idempotency_mismatch', 'Idempotency-Key was already used with a different request body');
      }
      if (entry.state === 'done') return { kind: 'replay', runId: entry.run_id };
      // Another request with this key is in flight: wait for it to finish or give up.
      if (Date.now() > deadline) throw new ServiceError('conflict', 'a request with this Idempotency-Key is still in progress');
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}
