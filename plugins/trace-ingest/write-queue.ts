// The bounded queue every bundle write goes through: writes of one run are
// serialized, the total pending is capped (saturated means 429), and its depth
// is a metric. Each record category (sdk/categories.ts) may hold only its
// share of the queue, so screenshots or events piling up never leave step
// records without room: the category of a write is the one of the route
// that queued it (WriteFrom.category, set by the HTTP layer on the route's context).
import { RATE_LIMITS_HEADER, formatRateLimits, type RecordCategory } from '../../sdk/categories.ts';
import { IngestError } from './http.ts';

/** What the batch route gives each of its records. */
export interface BatchScope {
  /**
   * The index commits the batch's writes wait for, awaited once before the batch
   * is answered, so its records do not each wait for a commit of their own.
   * They never reject: an error is the value.
   */
  commits: Array<Promise<Error | null>>;
  /** called once the record's write is queued (a pipelined record's) */
  queued?(): void;
}

/**
 * Where a write comes from: the category of its route (none: only the total
 * cap applies) and, inside a batch, its scope. Passed along explicitly, not in
 * an AsyncLocalStorage: one of those turns on promise hooks for the whole
 * process (the gateway's too, where the ingest is mounted), about 8% of the
 * ingest's CPU at 2,000 step records/s.
 */
export interface WriteFrom {
  category?: RecordCategory;
  batch?: BatchScope;
}

/** The share of the queue each category may fill; step records are bounded by the total only. */
export const QUEUE_SHARES: Record<RecordCategory, number> = { step: 1, event: 0.5, screenshot: 0.25, modelio: 0.25 };

/** Bounded queue of writes, serialized per run; its depth is exported as a metric. */
export class WriteQueue {
  depth = 0;
  /** writes refused with 429, by the category whose share was full, or `all` when the whole queue was */
  readonly rejected = new Map<RecordCategory | 'all', number>();
  processed = 0;
  readonly depthBy = new Map<RecordCategory, number>();
  private readonly chains = new Map<string, Promise<unknown>>();

  constructor(readonly limit: number) {}

  /** writes a category may have pending (at least one) */
  capOf(category: RecordCategory): number {
    return Math.max(1, Math.floor(this.limit * QUEUE_SHARES[category]));
  }

  reject(category: RecordCategory | 'all'): void {
    this.rejected.set(category, (this.rejected.get(category) ?? 0) + 1);
  }

  /**
   * Queues fn after the writes queued before it on the same key and lane. A
   * lane is a file only this kind of write touches (a screenshot, an events
   * file): its writes need no place among the run's other writes, only
   * among their own, and meet the others in the same message to the writer.
   */
  run<T>(key: string, fn: () => Promise<T>, opts: { lane?: string; category?: RecordCategory } = {}): Promise<T> {
    const { lane, category } = opts;
    if (this.depth >= this.limit) {
      this.reject('all');
      throw new IngestError(429, `ingest queue saturated (${this.depth} writes pending); retry later`, { 'Retry-After': '1' });
    }
    const mine = category ? (this.depthBy.get(category) ?? 0) : 0;
    if (category && mine >= this.capOf(category)) {
      this.reject(category);
      throw new IngestError(429, `ingest queue full for ${category} records (${mine} pending); retry later`, {
        'Retry-After': '1',
        [RATE_LIMITS_HEADER]: formatRateLimits([{ seconds: 1, categories: [category], scope: 'queue' }]),
      });
    }
    this.depth++;
    if (category) this.depthBy.set(category, mine + 1);
    const chain = lane === undefined ? key : `${key}\0${lane}`;
    const prev = this.chains.get(chain) ?? Promise.resolve();
    const p = prev.then(fn);
    const tail = p.then(
      () => undefined,
      () => undefined,
    ).finally(() => {
      this.depth--;
      if (category) this.depthBy.set(category, this.depthBy.get(category)! - 1);
      this.processed++;
      if (this.chains.get(chain) === tail) this.chains.delete(chain);
    });
    this.chains.set(chain, tail);
    return p;
  }

  /** resolves when every write queued so far for key, in any lane, has landed */
  async settled(key: string): Promise<void> {
    const mine = [...this.chains].filter(([chain]) => chain === key || chain.startsWith(`${key}\0`)).map(([, tail]) => tail);
    await Promise.all(mine);
  }

  async idle(): Promise<void> {
    while (this.chains.size) await Promise.all(this.chains.values());
  }
}
