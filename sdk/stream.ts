// Live streaming to the ingest service: a bounded background queue drained by
// one worker. Enqueueing never blocks and never throws; a full queue drops the
// new record (the local bundle stays authoritative). Records that queue up go
// out together through the batch route (screenshots in multipart batches of
// their own). 429: sleep Retry-After, reissue once,
// then drop with a warning. A 429 naming categories (X-Trace-Rate-Limits)
// holds back only those categories until Retry-After (stream-throttle.ts):
// their records are retried then, and dropped if refused again; the others
// keep flowing. A 403 on model-io latches model-io posting off.
// Records the ingest did not take (429 twice, 5xx, unreachable, queue full)
// go in a drop ledger; close() re-sends them once after the first flush (the
// reconciliation), so an ingest that was down mid-session still gets the whole
// run, except those refused with 429 twice: the spec's client drops them after
// its two requests (the local bundle stays authoritative), so neither close nor
// a later start sends them again (isFinalDrop). An ingest without the batch route (404/405: only the spec's routes) gets
// the same records one by one, and the session stops trying the batch route.
import { parseDsn, parseRetryAfter, type ParsedDsn } from './dsn.ts';
import { IngestTransport, type FormPart } from './http-fetch.ts';
import { batchOf } from './stream-batch.ts';
import { CategoryThrottle, namesCategories, refusedLimits } from './stream-throttle.ts';
import { categoryOf, type RateLimit, type RecordCategory } from './categories.ts';
import { sleep, type DroppedRecord, type Pending, type StreamJob, type StreamStats, type StreamerOptions } from './stream-types.ts';
import { SDK_VERSION, type SdkLogger } from './util.ts';

export { parseDsn, parseRetryAfter, type ParsedDsn } from './dsn.ts';

export type { DroppedRecord, StreamJob, StreamKind, StreamStats, StreamerOptions } from './stream-types.ts';

/** Screenshots per multipart batch, and their bytes together (a full-page capture can be megabytes; the ingest takes 20 MB a request) */
const IMAGE_BATCH_MAX = 8;
const IMAGE_BATCH_BYTES = 8 * 1024 * 1024;

/** A record dropped by the spec's 429 rule (refused twice): it stays in the ledger, never sent again. */
export const isFinalDrop = (d: DroppedRecord | undefined): boolean => d?.reason === '429';

export class Streamer {
  readonly dsn: ParsedDsn;
  readonly stats: StreamStats = { sent: 0, dropped: 0, failed: 0, retried: 0, batches: 0, throttled: 0 };
  /** categories held back after a 429 that named them */
  readonly throttle = new CategoryThrottle();
  /** what the ingest did not take (see DroppedRecord) */
  readonly ledger: DroppedRecord[] = [];
  private readonly missed: Pending[] = [];
  /** every record that went in the ledger, for what close() could not deliver (unsent) */
  private readonly everMissed: Pending[] = [];
  /** set by a 403 on a model-io post: no more model-io goes out this session */
  modelioLatched = false;
  private readonly queue: Pending[] = [];
  private readonly byKey = new Map<string, Pending>();
  private readonly log: SdkLogger;
  private readonly queueMax: number;
  private readonly batchMax: number;
  private readonly lingerMs: number;
  /** ends the current linger at once (flush, close) */
  private release: (() => void) | null = null;
  /** true while flush waits: a kick then does not linger */
  private flushing = false;
  private readonly transport: IngestTransport;
  private running: Promise<void> | null = null;
  private abort = new AbortController();
  private warnedFull = false;
  private closed = false;
  /** the ingest answered the batch route 404/405: per-record routes only, for the rest of the session */
  private batchUnsupported = false;
  /** the ingest's batch route takes JSON only (415 on a multipart batch): screenshots go one per request */
  private imageBatchUnsupported = false;
  /** wakes a lane napping until a held-back category opens, when a record arrives */
  private wake: (() => void) | null = null;
  private readonly warnedThrottled = new Set<string>();

  constructor(opts: StreamerOptions) {
    this.dsn = parseDsn(opts.dsn);
    this.log = opts.logger;
    this.queueMax = opts.queueMax ?? 5000;
    this.batchMax = Math.max(1, opts.batchMax ?? 200);
    this.lingerMs = Math.max(0, opts.lingerMs ?? 0);
    this.transport = new IngestTransport(this.dsn.baseUrl, {
      authorization: `Bearer ${this.dsn.key}`,
      'user-agent': `runplane-trace-sdk/${SDK_VERSION} (${opts.clientName.replace(/[^\x20-\x7e]/g, '?')})`,
      'x-trace-client-id': opts.clientId,
    }, opts.fetch);
  }

  get depth(): number {
    return this.queue.length;
  }

  /** true while a job with this key waits to be sent */
  pending(key: string): boolean {
    return this.byKey.has(key);
  }

  enqueue(job: StreamJob): void {
    if (this.closed) return;
    if (job.kind === 'modelio' && this.modelioLatched) return;
    if (job.key) {
      const pending = this.byKey.get(job.key);
      if (pending) {
        pending.body = job.body;
        pending.image = job.image;
        return;
      }
    }
    if (this.queue.length >= this.queueMax) {
      this.stats.dropped++;
      this.miss([{ ...job, tries: 0 }], 'queue_full');
      if (!this.warnedFull) {
        this.warnedFull = true;
        this.log.warn('trace stream queue is full; dropping live records (the local bundle stays complete)', { queue_max: this.queueMax });
      }
      return;
    }
    const p: Pending = { ...job, tries: 0 };
    this.queue.push(p);
    if (job.key) this.byKey.set(job.key, p);
    this.wake?.();
    this.kick();
  }

  /**
   * Starts draining on a later turn: records posted in one burst (a step, its
   * screenshots, its events) go out together, and the request is built and
   * sent off the recording call's path (starting a fetch costs the caller
   * 0.1-0.2 ms, about all of a paced step's SDK time before). With `lingerMs`
   * the records of the next few steps wait to join them: fewer, larger requests.
   */
  private kick(): void {
    if (this.running) return;
    const started = new Promise<void>((resolve) => {
      if (!this.lingerMs || this.flushing) return void setImmediate(resolve);
      const t = setTimeout(resolve, this.lingerMs);
      this.release = () => {
        clearTimeout(t);
        resolve();
      };
    });
    this.running = started.then(() => {
      this.release = null;
      return this.drain();
    }).finally(() => {
      this.running = null;
      if (this.queue.length && !this.abort.signal.aborted) this.kick();
    });
  }

  /** Takes up to `max` queued jobs of one lane (images or JSON records), keeping their order; images up to IMAGE_BATCH_BYTES together. */
  private take(images: boolean, max: number): Pending[] {
    const jobs: Pending[] = [];
    let bytes = 0;
    // records per category in this request, up to a throttled category's cap
    const per = new Map<RecordCategory | null, number>();
    const room = (j: Pending) => !this.throttle.blocked(j.kind) && (per.get(categoryOf(j.kind)) ?? 0) < this.throttle.capOf(j.kind);
    for (let i = 0; i < this.queue.length && jobs.length < max; ) {
      const j = this.queue[i]!;
      if (images && jobs.length && j.image && bytes + j.image.length > IMAGE_BATCH_BYTES) break;
      if (Boolean(j.image) === images && !(j.kind === 'modelio' && this.modelioLatched) && room(j)) {
        bytes += j.image?.length ?? 0;
        per.set(categoryOf(j.kind), (per.get(categoryOf(j.kind)) ?? 0) + 1);
        this.queue.splice(i, 1);
        if (j.key && this.byKey.get(j.key) === j) this.byKey.delete(j.key);
        jobs.push(j);
      } else if (j.kind === 'modelio' && this.modelioLatched) {
        this.queue.splice(i, 1);
        if (j.key && this.byKey.get(j.key) === j) this.byKey.delete(j.key);
      } else i++;
    }
    const cats = [...per.keys()].filter((c): c is RecordCategory => c !== null);
    this.throttle.sending(cats);
    for (const c of cats) if (!this.queue.some((j) => categoryOf(j.kind) === c)) this.throttle.drained(c);
    return jobs;
  }

  /**
   * Two lanes drain side by side: JSON records (in order, together through the
   * batch route when more than one waits) and screenshots (independent files:
   * together through a multipart batch, or up to four uploads at a time where
   * the ingest has no such route). Order matters only among JSON records.
   */
  private async drain(): Promise<void> {
    const lane = async (images: boolean) => {
      while (!this.abort.signal.aborted) {
        const one = this.batchUnsupported || (images && this.imageBatchUnsupported);
        const jobs = this.take(images, images ? (one ? 4 : IMAGE_BATCH_MAX) : one ? 1 : this.batchMax);
        if (!jobs.length) {
          // only held-back records of this lane wait: nap until their category opens (or a record arrives)
          const wait = this.throttle.nextOpen();
          if (wait === null || !this.queue.some((j) => Boolean(j.image) === images)) return;
          await this.nap(wait);
          continue;
        }
        try {
          if (images && (jobs.length === 1 || one || !(await this.sendBatch(jobs)))) await Promise.all(jobs.map((j) => this.sendOne(j).catch((err: Error) => this.fail([j], err))));
          else if (images) continue;
          else if (jobs.length === 1) await this.sendOne(jobs[0]!);
          else if (!(await this.sendBatch(jobs))) await this.sendEach(jobs);
        } catch (err) {
          // never let a streaming failure escape
          this.fail(jobs, err as Error);
        }
      }
    };
    await Promise.all([lane(false), lane(true)]);
  }

  private async nap(ms: number): Promise<void> {
    const woken = new Promise<void>((resolve) => (this.wake = resolve));
    await Promise.race([sleep(ms, this.abort.signal), woken]);
    this.wake = null;
  }

  /**
   * Records refused by a 429 naming categories: those categories are held back
   * until Retry-After; a record refused the first time goes back to the front
   * of the queue (in order), the second time to the drop ledger (re-sent at close).
   */
  private refused(jobs: Pending[], limits: RateLimit[], accepted: Pending[] = []): void {
    this.throttle.note(limits);
    const seconds = Math.max(0, ...limits.map((l) => l.seconds));
    for (const c of new Set(jobs.map((j) => categoryOf(j.kind)))) if (c) this.throttle.refusedIn(c, accepted.filter((a) => categoryOf(a.kind) === c).length, seconds);
    const again: Pending[] = [];
    for (const j of jobs) {
      this.stats.throttled++;
      if ((j.limited ?? 0) >= 1) {
        this.stats.dropped++;
        this.miss([j], '429');
        const c = limits.map((l) => l.categories.join(';')).join(',');
        if (!this.warnedThrottled.has(c)) this.log.warn(`trace ingest rate-limited ${c} records twice; dropping them live (re-sent at close; the local bundle stays authoritative)`);
        this.warnedThrottled.add(c);
        continue;
      }
      j.limited = (j.limited ?? 0) + 1;
      this.stats.retried++;
      // a keyed record with a newer pending version is superseded by it
      if (j.key && this.byKey.has(j.key)) continue;
      if (j.key) this.byKey.set(j.key, j);
      again.push(j);
    }
    this.queue.unshift(...again);
  }

  private fail(jobs: Pending[], err: Error): void {
    this.stats.failed += jobs.length;
    if (!this.abort.signal.aborted) this.miss(jobs, 'unreachable');
    this.log.debug('trace stream error', { error: err.message });
  }

  private bodyOf(job: Pending): unknown {
    return typeof job.body === 'function' ? (job.body as () => unknown)() : job.body;
  }

  /** One request on the session's abort signal (shutdown and the flush deadline abort it). */
  private http(method: string, path: string, init: { json?: unknown; image?: Buffer; name?: string; parts?: FormPart[] }): Promise<Response> {
    return this.transport.send(method, path, init, this.abort.signal);
  }

  /** One request with the 429 rule: sleep Retry-After, reissue once, then drop. */
  private async withRetry(what: string, send: () => Promise<Response>): Promise<Response | null> {
    for (let attempt = 0; ; attempt++) {
      const res = await send();
      // a 429 naming categories is the caller's: it holds back those categories instead of sleeping here
      if (res.status !== 429 || namesCategories(res)) return res;
      await res.arrayBuffer().catch(() => undefined);
      if (attempt >= 1) {
        this.stats.dropped++;
        this.log.warn(`trace ingest answered 429 twice; dropped ${what} (the local bundle stays authoritative)`);
        return null;
      }
      this.stats.retried++;
      await sleep(parseRetryAfter(res.headers.get('retry-after')) * 1000, this.abort.signal);
      if (this.abort.signal.aborted) return null;
    }
  }

  private async sendOne(job: Pending): Promise<void> {
    const json = job.image ? undefined : this.bodyOf(job);
    const res = await this.withRetry(`${job.method} ${job.path}`, () => this.http(job.method, job.path, { json, image: job.image, name: job.path.split('/').slice(-2).join('_') + '.png' }));
    if (!res) {
      if (!this.abort.signal.aborted) this.miss([job], '429');
      return;
    }
    if (res.status === 429) return this.refused([job], refusedLimits(res.headers, job.kind));
    const text = await res.text().catch(() => '');
    this.settle(job, res.status, text);
  }

  private settle(job: Pending, status: number, detail: string): void {
    if (status < 300) {
      this.stats.sent++;
      if (job.dropped) job.dropped.recovered = true;
      job.onSent?.();
      return;
    }
    this.stats.failed++;
    if (status >= 500) this.miss([job], `http_${status}`);
    if (status === 403 && job.kind === 'modelio') {
      if (!this.modelioLatched) this.log.warn('trace ingest refused model-io (403): live model-io posting is off for this session');
      this.modelioLatched = true;
      return;
    }
    this.log.debug('trace ingest refused a record', { path: job.path, status, detail: detail.slice(0, 300) });
  }

  /** In order, one request each: the fallback when the batch route is missing. */
  private async sendEach(jobs: Pending[]): Promise<void> {
    for (const [i, j] of jobs.entries()) {
      if (this.abort.signal.aborted) {
        this.stats.dropped += jobs.length - i;
        return;
      }
      await this.sendOne(j).catch((err: Error) => this.fail([j], err));
    }
  }

  /**
   * false when the ingest has no batch route, or no multipart one for images
   * (the jobs were not sent); true when they were settled. Images go as a
   * multipart batch: a `requests` part naming each image's part (stream-batch.ts).
   */
  private async sendBatch(jobs: Pending[]): Promise<boolean> {
    const { requests, owners, parts } = batchOf(jobs, (j) => this.bodyOf(j));
    this.stats.batches++;
    const res = await this.withRetry(`a batch of ${jobs.length} records`, () => this.http('POST', '/batch', parts ? { parts } : { json: { requests } }));
    if (!res) {
      this.stats.dropped += jobs.length - 1; // withRetry counted one
      if (!this.abort.signal.aborted) this.miss(jobs, '429');
      return true;
    }
    if (res.status === 429) {
      for (const j of jobs) this.refused([j], refusedLimits(res.headers, j.kind));
      return true;
    }
    const text = await res.text();
    if (res.status === 404 || res.status === 405) {
      // the batch route is our addition, not the spec's: an ingest with only the
      // spec's routes gets every record on its own route instead of losing them
      this.stats.batches--;
      this.batchUnsupported = true;
      this.log.debug('trace ingest has no batch route; sending records one by one', { status: res.status });
      return false;
    }
    if (res.status === 415 && parts) {
      // an ingest whose batch route predates multipart batches: screenshots one per request
      this.stats.batches--;
      this.imageBatchUnsupported = true;
      return false;
    }
    if (res.status !== 207) {
      for (const j of jobs) this.settle(j, res.status, text);
      return true;
    }
    const parsed = JSON.parse(text) as { results?: Array<{ index: number; status: number; detail?: string; retry_after?: number; rate_limits?: string }> };
    const refused: Pending[] = [];
    const accepted: Pending[] = [];
    let limits: RateLimit[] = [];
    for (const r of parsed.results ?? []) {
      for (const j of owners[r.index] ?? []) {
        if (r.status === 429) {
          refused.push(j);
          limits = [...limits, ...refusedLimits(res.headers, j.kind, r)];
        } else {
          if (r.status < 300) accepted.push(j);
          this.settle(j, r.status, r.detail ?? '');
        }
      }
    }
    if (refused.length) this.refused(refused, limits, accepted);
    return true;
  }

  /** Waits until everything queued went out, or the deadline passed (then drops the rest). */
  async flush(deadlineMs: number): Promise<void> {
    const until = Date.now() + deadlineMs;
    this.flushing = true;
    this.release?.();
    try {
      await this.flushUntil(until);
    } finally {
      this.flushing = false;
    }
  }

  private async flushUntil(until: number): Promise<void> {
    while ((this.running || this.queue.length) && Date.now() < until) {
      const wait = this.running ?? Promise.resolve();
      let t: NodeJS.Timeout | undefined;
      await Promise.race([wait, new Promise<void>((r) => (t = setTimeout(r, Math.max(1, until - Date.now()))))]);
      clearTimeout(t);
      if (!this.running && this.queue.length) this.kick();
    }
    if (this.running || this.queue.length) {
      this.stats.dropped += this.queue.length;
      this.miss(this.queue, 'deadline');
      if (this.queue.length) this.log.warn(`trace stream flush deadline passed; ${this.queue.length} live records not sent`);
      this.queue.length = 0;
      this.byKey.clear();
      this.abort.abort();
      await this.running?.catch(() => undefined);
    }
  }

  async close(deadlineMs: number): Promise<void> {
    const until = Date.now() + deadlineMs;
    await this.flush(deadlineMs);
    await this.reconcile(until);
    this.closed = true;
    this.abort.abort();
  }

  private miss(jobs: Pending[], reason: string): void {
    for (const j of jobs) {
      if (j.kind === 'heartbeat') continue; // a late heartbeat says nothing true
      if (j.dropped) {
        j.dropped.reason = reason;
        continue;
      }
      j.dropped = { kind: j.kind, method: j.method, path: j.path, reason, recovered: false };
      this.ledger.push(j.dropped);
      this.missed.push(j);
      this.everMissed.push(j);
    }
  }

  /**
   * Re-sends, once and in their order, the records the ingest did not take: a
   * step's body is read again so it goes out as it is now (as in the bundle),
   * a screenshot or an appended record goes out as it was recorded. Those the
   * ingest never stored (429, 5xx, unreachable, queue full) are missing there,
   * so an append is not doubled.
   */
  private async reconcile(until: number): Promise<void> {
    const again = this.missed.splice(0).filter((j) => !j.dropped?.recovered && !isFinalDrop(j.dropped));
    if (!again.length || this.abort.signal.aborted || Date.now() >= until) return;
    this.log.debug('trace stream reconciling records the ingest did not take', { records: again.length });
    for (const j of again) {
      j.tries++;
      j.limited = 0;
      this.queue.push(j);
    }
    this.kick();
    await this.flush(Math.max(1, until - Date.now()));
  }

  /** Records in the ledger not delivered yet, with their bodies read now (after close: what a later start must re-send). */
  unsent(): Array<{ entry: DroppedRecord; body?: unknown; image?: Buffer }> {
    return this.everMissed
      .filter((j) => j.dropped && !j.dropped.recovered && !isFinalDrop(j.dropped))
      .map((j) => ({ entry: j.dropped!, ...(j.image ? { image: j.image } : { body: this.bodyOf(j) }) }));
  }

  /** A raw request with the DSN's credential (the command long-poll uses it). */
  request(method: string, path: string, signal: AbortSignal): Promise<Response> {
    return this.transport.send(method, path, {}, signal);
  }
}
