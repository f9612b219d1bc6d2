// The bounded queue every bundle write goes through: writes of one run are
// serialized, the total pending is capped (saturated means 429), and its depth
// is a metric.
import { IngestError } from './http.ts';

/** Bounded queue of writes, serialized per run; its depth is exported as a metric. */
export class WriteQueue {
  depth = 0;
  rejected = 0;
  processed = 0;
  private readonly chains = new Map<string, Promise<unknown>>();

  constructor(readonly limit: number) {}

  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    if (this.depth >= this.limit) {
      this.rejected++;
      throw new IngestError(429, `ingest queue saturated (${this.depth} writes pending); retry later`, { 'Retry-After': '1' });
    }
    this.depth++;
    const prev = this.chains.get(key) ?? Promise.resolve();
    const p = prev.then(fn);
    const tail = p.then(
      () => undefined,
      () => undefined,
    ).finally(() => {
      this.depth--;
      this.processed++;
      if (this.chains.get(key) === tail) this.chains.delete(key);
    });
    this.chains.set(key, tail);
    return p;
  }

  /** resolves when every write queued so far for key has landed */
  async settled(key: string): Promise<void> {
    await this.chains.get(key);
  }

  async idle(): Promise<void> {
    while (this.chains.size) await Promise.all(this.chains.values());
  }
}
