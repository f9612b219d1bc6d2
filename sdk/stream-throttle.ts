// Per-category back-off of the SDK's streamer: a 429 naming categories
// (X-Trace-Rate-Limits, sdk/categories.ts) holds back records of those
// categories until its Retry-After has passed, and no others, so throttled
// screenshots never delay step records.
import { RATE_LIMITS_HEADER, categoryOf, parseRateLimits, type RateLimit, type RecordCategory } from './categories.ts';
import { parseRetryAfter } from './dsn.ts';
import type { StreamKind } from './stream-types.ts';

export class CategoryThrottle {
  private readonly until = new Map<RecordCategory, number>();
  /**
   * A throttled category is paced until its queued records are out: one
   * request carries at most what the ingest took in the request it refused
   * some in (at least one), and the next waits the last Retry-After; a burst
   * would only be refused again (and a record refused twice is dropped).
   */
  private readonly pace = new Map<RecordCategory, { cap: number; seconds: number }>();

  capOf(kind: StreamKind): number {
    const c = categoryOf(kind);
    return (c && this.pace.get(c)?.cap) || Infinity;
  }

  /** Records of `category` were refused in a request that took `accepted` others of it, for `seconds`. */
  refusedIn(category: RecordCategory, accepted: number, seconds: number): void {
    this.pace.set(category, { cap: Math.max(1, accepted), seconds: Math.max(1, seconds) });
  }

  /** A request carrying records of these categories goes out now: a paced category waits its interval before the next. */
  sending(categories: Iterable<RecordCategory>, now = Date.now()): void {
    for (const c of categories) {
      const p = this.pace.get(c);
      if (p) this.until.set(c, Math.max(this.until.get(c) ?? 0, now + p.seconds * 1000));
    }
  }

  /** No record of the category waits any more: it is sent at full speed again. */
  drained(category: RecordCategory): void {
    this.pace.delete(category);
  }

  /** True while records of this kind are held back. */
  blocked(kind: StreamKind, now = Date.now()): boolean {
    const c = categoryOf(kind);
    return c !== null && (this.until.get(c) ?? 0) > now;
  }

  note(limits: RateLimit[], now = Date.now()): void {
    for (const l of limits) {
      for (const c of l.categories) {
        this.until.set(c, Math.max(this.until.get(c) ?? 0, now + l.seconds * 1000));
      }
    }
  }

  /** ms until the first held-back category opens again, or null when none is held back */
  nextOpen(now = Date.now()): number | null {
    let next: number | null = null;
    for (const t of this.until.values()) if (t > now) next = next === null ? t - now : Math.min(next, t - now);
    return next;
  }
}

/** The limits a 429 names: its X-Trace-Rate-Limits header, else (a refusal without one) the record's own category for Retry-After. */
export function refusedLimits(headers: Headers | null, kind: StreamKind, fields: { retry_after?: unknown; rate_limits?: unknown } = {}): RateLimit[] {
  const named = parseRateLimits(typeof fields.rate_limits === 'string' ? fields.rate_limits : headers?.get(RATE_LIMITS_HEADER));
  if (named.length) return named;
  const c = categoryOf(kind);
  const seconds = typeof fields.retry_after === 'number' ? Math.min(30, Math.max(0, fields.retry_after)) : parseRetryAfter(headers?.get('retry-after') ?? null);
  return c ? [{ seconds, categories: [c], scope: '' }] : [];
}

/** True for a 429 that names the categories it limits (the SDK then holds back those categories instead of sleeping). */
export const namesCategories = (res: Response): boolean => res.status === 429 && parseRateLimits(res.headers.get(RATE_LIMITS_HEADER)).length > 0;
