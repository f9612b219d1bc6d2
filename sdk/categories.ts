// Record categories of the trace ingest's rate limits, shared by the ingest
// service (plugins may import sdk/) and the SDK's streamer: a throttled
// category names the records the SDK holds back, and no other.
import type { StreamKind } from './stream-types.ts';

/** step: manifest, trace, steps, costs and the run's own records; event: events, logs, reasoning, judge decisions; screenshot; modelio. */
export const RECORD_CATEGORIES = ['step', 'event', 'screenshot', 'modelio'] as const;
export type RecordCategory = (typeof RECORD_CATEGORIES)[number];

/** The response header naming the limited categories: `<seconds>:<category>[;<category>...]:<scope>`, several joined by `, `. */
export const RATE_LIMITS_HEADER = 'X-Trace-Rate-Limits';

/** The category of a streamed record kind; heartbeats are none (never limited). */
export function categoryOf(kind: StreamKind): RecordCategory | null {
  switch (kind) {
    case 'screenshot':
      return 'screenshot';
    case 'modelio':
      return 'modelio';
    case 'events':
    case 'logs':
    case 'reasoning':
    case 'judge_decision':
      return 'event';
    case 'heartbeat':
      return null;
    default:
      return 'step';
  }
}

export interface RateLimit {
  seconds: number;
  categories: RecordCategory[];
  /** tenant: the tenant's rate limit; queue: the category's share of the write queue */
  scope: string;
}

export function formatRateLimits(limits: RateLimit[]): string {
  return limits.map((l) => `${l.seconds}:${l.categories.join(';')}:${l.scope}`).join(', ');
}

/** The limits of an X-Trace-Rate-Limits header (unknown categories and malformed items skipped; seconds clamped to 0..30 as Retry-After is). */
export function parseRateLimits(header: string | null | undefined): RateLimit[] {
  const out: RateLimit[] = [];
  for (const item of (header ?? '').split(',')) {
    const [s, cats, scope] = item.trim().split(':');
    const seconds = Number(s);
    if (!Number.isFinite(seconds) || cats === undefined) continue;
    const categories = cats.split(';').filter((c): c is RecordCategory => (RECORD_CATEGORIES as readonly string[]).includes(c));
    if (categories.length) out.push({ seconds: Math.min(30, Math.max(0, seconds)), categories, scope: scope ?? '' });
  }
  return out;
}
