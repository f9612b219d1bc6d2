// The ingest service's rate limits, on rate-limiter-flexible: failed logins
// (per e-mail and per client address) and records per tenant per category
// (sdk/categories.ts). With a Redis URL (TRACE_REDIS_URL; mounted in the
// gateway, SERVICE_REDIS_URL) every replica counts in the same Redis; without
// one each process counts alone. While Redis is unreachable a memory limiter
// per process stands in (the library's insuranceLimiter): limits stay on,
// per replica, rather than failing open or locking every login out.
import { createHmac, randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { BurstyRateLimiter, RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type IRateLimiterOptions, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { RECORD_CATEGORIES, RATE_LIMITS_HEADER, formatRateLimits, type RecordCategory } from '../../sdk/categories.ts';
import { IngestError } from './http.ts';

/** A category's token-bucket-like limit: `rate` records a second, plus `burst` more within 10 s when the rate is spent. */
export interface CategoryLimit {
  rate: number;
  burst: number;
}

/**
 * Generous defaults (per tenant, summed over its clients and the replicas
 * sharing Redis): above the throughput the service aims at (2,000 step records
 * a second with two screenshots each), so only a runaway client meets them. At
 * 50 screenshots a second, bench/trace's eight sessions of one tenant saw most
 * of their screenshots throttled and dropped.
 */
export const DEFAULT_CATEGORY_LIMITS: Record<RecordCategory, CategoryLimit> = {
  step: { rate: 5000, burst: 50000 },
  event: { rate: 10000, burst: 100000 },
  screenshot: { rate: 5000, burst: 50000 },
  modelio: { rate: 1000, burst: 10000 },
};

const BURST_WINDOW_S = 10;
const LOGIN_WINDOW_S = 15 * 60;

/**
 * `step=200/2000,screenshot=5` (TRACE_RATE_LIMITS): per category `<rate per second>[/<burst>]`
 * (burst defaults to ten times the rate); unknown categories or malformed values throw.
 */
export function parseCategoryLimits(text: string | undefined): Partial<Record<RecordCategory, CategoryLimit>> {
  const out: Partial<Record<RecordCategory, CategoryLimit>> = {};
  for (const item of (text ?? '').split(',').map((s) => s.trim()).filter(Boolean)) {
    const m = /^([a-z]+)=(\d+(?:\.\d+)?)(?:\/(\d+))?$/.exec(item);
    if (!m || !(RECORD_CATEGORIES as readonly string[]).includes(m[1]!)) throw new Error(`TRACE_RATE_LIMITS: "${item}" is not <${RECORD_CATEGORIES.join('|')}>=<per second>[/<burst>]`);
    const rate = Number(m[2]);
    out[m[1] as RecordCategory] = { rate, burst: m[3] !== undefined ? Number(m[3]) : Math.ceil(rate * 10) };
  }
  return out;
}

/**
 * The login limiters' memory counts (the only ones without Redis, the stand-in while
 * Redis is down) hold at most this many keys each: a flood of distinct e-mails or
 * IPv6 addresses would otherwise grow the process for the 15 minutes each key lives.
 */
export const DEFAULT_LOGIN_MEMORY_KEYS = 65_536;

/**
 * A memory limiter that counts each key in one of `buckets` buckets, picked by a
 * hash keyed with a secret of this process, so a client cannot aim its keys at
 * another's bucket. Two keys may share a bucket and its count: in a flood, logins
 * fail closed (429) rather than the process growing without bound.
 */
export class BucketedMemoryLimiter extends RateLimiterMemory {
  private readonly secret = randomBytes(32);

  constructor(
    opts: IRateLimiterOptions,
    private readonly buckets: number,
  ) {
    super(opts);
  }

  override getKey(key: string | number): string {
    return super.getKey(createHmac('sha256', this.secret).update(String(key)).digest().readUInt32BE(0) % this.buckets);
  }

  /** keys held now (read from the library's memory storage, of the pinned version) */
  get keyCount(): number {
    return (this as unknown as { _memoryStorage: { _storage: Map<string, unknown> } })._memoryStorage._storage.size;
  }
}

export interface LimitsOptions {
  redisUrl?: string;
  loginMaxFailures?: number;
  /** keys each login limiter keeps in memory (TRACE_LOGIN_MEMORY_KEYS; default DEFAULT_LOGIN_MEMORY_KEYS) */
  loginMemoryKeys?: number;
  rateLimits?: Partial<Record<RecordCategory, CategoryLimit>>;
  logger?: { warn(m: string, f?: Record<string, unknown>): void };
}

export class IngestLimits {
  readonly redis: Redis | null;
  private readonly loginEmail: RateLimiterAbstract;
  private readonly loginAddr: RateLimiterAbstract;
  private readonly categories = new Map<RecordCategory, BurstyRateLimiter>();
  readonly loginMaxFailures: number;
  /** records refused by a category's limit in this process (a metric) */
  readonly refused = new Map<RecordCategory, number>();

  constructor(opts: LimitsOptions) {
    this.loginMaxFailures = opts.loginMaxFailures ?? 10;
    // commands fail at once while Redis is down (no offline queue), so the insurance limiter answers
    this.redis = opts.redisUrl ? new Redis(opts.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2000, retryStrategy: (n: number) => Math.min(100 * 2 ** n, 2000) }) : null;
    let warned = false;
    this.redis?.on('error', (err: Error) => {
      if (!warned) opts.logger?.warn('trace ingest: Redis for rate limits unreachable; limits count per process meanwhile', { error: err.message });
      warned = true;
    });
    this.redis?.on('ready', () => (warned = false));
    const make = (keyPrefix: string, points: number, duration: number, buckets?: number): RateLimiterAbstract => {
      const memory = buckets ? new BucketedMemoryLimiter({ keyPrefix, points, duration }, buckets) : new RateLimiterMemory({ keyPrefix, points, duration });
      if (!this.redis) return memory;
      return new RateLimiterRedis({ storeClient: this.redis, keyPrefix: `trace:rl:${keyPrefix}`, points, duration, rejectIfRedisNotReady: true, insuranceLimiter: memory });
    };
    // the category limiters' keys are tenant ids, as many as there are tenants; a login's are the client's to choose
    const keys = opts.loginMemoryKeys ?? DEFAULT_LOGIN_MEMORY_KEYS;
    this.loginEmail = make('login-email', this.loginMaxFailures, LOGIN_WINDOW_S, keys);
    // ten times as many per address, so one guesser behind a shared address does not lock out the rest
    this.loginAddr = make('login-addr', this.loginMaxFailures * 10, LOGIN_WINDOW_S, keys);
    const limits = { ...DEFAULT_CATEGORY_LIMITS, ...opts.rateLimits };
    for (const c of RECORD_CATEGORIES) {
      const l = limits[c];
      this.categories.set(c, new BurstyRateLimiter(make(`cat-${c}`, Math.max(1, Math.floor(l.rate)), 1), make(`cat-${c}-burst`, Math.max(1, Math.floor(l.burst)), BURST_WINDOW_S)));
    }
  }

  /**
   * Resolves once Redis is connected, or after `timeoutMs` (Redis down: the
   * insurance limiters count meanwhile). A replica that answered before its
   * connection was ready would count its first logins alone.
   */
  async connected(timeoutMs: number): Promise<void> {
    const redis = this.redis;
    if (!redis || redis.status === 'ready') return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(t);
        redis.off('ready', done);
        resolve();
      };
      const t = setTimeout(done, timeoutMs);
      redis.once('ready', done);
    });
  }

  /**
   * Counts a login attempt before its password is checked, so parallel guesses
   * (on any replica) cannot all pass a check made before any failure counted;
   * 429 with Retry-After when the e-mail or the address has used up its failures.
   */
  async beginLogin(email: string, address: string): Promise<void> {
    const [e, a] = await Promise.allSettled([this.loginEmail.consume(email), this.loginAddr.consume(address)]);
    const refused = [e, a].filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (!refused.length) return;
    for (const r of refused) rejectUnlessRes(r.reason);
    const wait = Math.max(...refused.map((r) => (r.reason as RateLimiterRes).msBeforeNext));
    throw new IngestError(429, 'too many failed logins; retry later', { 'Retry-After': String(Math.max(1, Math.ceil(wait / 1000))) });
  }

  /**
   * A successful login clears its e-mail's failures and gives its address its
   * attempt back (not the address's other failures: one success must not reset a guesser).
   */
  async loginSucceeded(email: string, address: string): Promise<void> {
    await Promise.all([this.loginEmail.delete(email), this.loginAddr.reward(address)]);
  }

  /** Takes one record of `category` for the tenant; 429 with Retry-After and X-Trace-Rate-Limits when its limit is spent. */
  async take(tenantId: string, category: RecordCategory): Promise<void> {
    try {
      await this.categories.get(category)!.consume(tenantId);
    } catch (err) {
      rejectUnlessRes(err);
      this.refused.set(category, (this.refused.get(category) ?? 0) + 1);
      const seconds = Math.max(1, Math.ceil((err as RateLimiterRes).msBeforeNext / 1000));
      throw new IngestError(429, `rate limit of ${category} records reached for this tenant; retry after ${seconds} s`, {
        'Retry-After': String(seconds),
        [RATE_LIMITS_HEADER]: formatRateLimits([{ seconds, categories: [category], scope: 'tenant' }]),
      });
    }
  }

  /** Closes the Redis connection: QUIT, or a hard disconnect after 1 s (a hung Redis must not hold up shutdown). */
  async close(): Promise<void> {
    const redis = this.redis;
    if (!redis) return;
    let timer: NodeJS.Timeout | undefined;
    const quit = redis.quit().then(() => true, () => false);
    const ok = await Promise.race([quit, new Promise<false>((r) => (timer = setTimeout(() => r(false), 1000)))]);
    clearTimeout(timer);
    if (!ok) redis.disconnect();
  }
}

/** A RateLimiterRes rejection is the limit speaking; anything else (Redis without insurance) is an error. */
function rejectUnlessRes(err: unknown): void {
  if (!(err instanceof RateLimiterRes)) throw err;
}
