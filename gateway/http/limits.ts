// Per-tenant token bucket and concurrency slots, over AtomicOps so the caps are
// exact across replicas when Redis backs them.
import { ServiceError } from '../errors.ts';
import type { AtomicOps } from '../state/atomic.ts';
import type { Metrics } from '../metrics.ts';
import type { Tenant } from './tenants.ts';

export interface RateHeaders {
  'X-RateLimit-Limit': string;
  'X-RateLimit-Remaining': string;
  'X-RateLimit-Reset': string;
}

export class Limits {
  constructor(
    private readonly atomic: AtomicOps,
    private readonly metrics: Metrics,
  ) {}

  /**
   * Takes one token. Returns the headers to put on the response (none when the
   * tenant's limiter is disabled); throws 429 with Retry-After when empty.
   */
  async takeRateToken(tenant: Tenant): Promise<RateHeaders | undefined> {
    const perMinute = tenant.rate_limit_per_minute;
    if (perMinute <= 0) return undefined;
    const refill = perMinute / 60;
    const r = await this.atomic.takeToken(`rate:${tenant.tenant_id}`, perMinute, refill);
    const fullInMs = ((perMinute - r.tokens) / refill) * 1000;
    const headers: RateHeaders = {
      'X-RateLimit-Limit': String(perMinute),
      'X-RateLimit-Remaining': String(Math.max(0, Math.floor(r.tokens))),
      'X-RateLimit-Reset': String(Math.ceil((r.nowMs + fullInMs) / 1000)),
    };
    if (!r.allowed) {
      this.metrics.rateLimitRejection(tenant.tenant_id, 'rate');
      const retryAfter = Math.max(1, Math.ceil((1 - r.tokens) / refill));
      throw new ServiceError('rate_limited', `rate limit of ${perMinute} requests per minute exceeded; retry in ${retryAfter} s`, {
        ...headers,
        'Retry-After': String(retryAfter),
      });
    }
    return headers;
  }

  /**
   * Holds one of the tenant's run slots for runId, or throws 429 with Retry-After 5.
   * At the limit, holders that `hasEnded` says are over are released first: the
   * run record is the truth, and a slot its ending did not free (a crash between
   * the two) must not count against the tenant forever.
   */
  async acquireRunSlot(tenant: Tenant, runId: string, hasEnded?: (holder: string) => Promise<boolean>): Promise<void> {
    const key = `runs:${tenant.tenant_id}`;
    let ok = await this.atomic.acquireSlot(key, runId, tenant.max_concurrent_runs);
    if (!ok && hasEnded) {
      let freed = 0;
      for (const holder of await this.atomic.slotHolders(key)) if ((await hasEnded(holder)) && (await this.atomic.releaseSlot(key, holder))) freed++;
      if (freed > 0) ok = await this.atomic.acquireSlot(key, runId, tenant.max_concurrent_runs);
    }
    if (!ok) {
      this.metrics.rateLimitRejection(tenant.tenant_id, 'concurrent');
      throw new ServiceError('concurrency_limited', `at the limit of ${tenant.max_concurrent_runs} concurrent runs`, { 'Retry-After': '5' });
    }
    this.metrics.concurrentRuns(tenant.tenant_id, await this.atomic.slotCount(key));
  }

  /** Frees the slot; true only for the one call that actually freed it. */
  async releaseRunSlot(tenantId: string, runId: string): Promise<boolean> {
    const key = `runs:${tenantId}`;
    const released = await this.atomic.releaseSlot(key, runId);
    if (released) this.metrics.concurrentRuns(tenantId, await this.atomic.slotCount(key));
    return released;
  }

  async runningCount(tenantId: string): Promise<number> {
    return this.atomic.slotCount(`runs:${tenantId}`);
  }
}
