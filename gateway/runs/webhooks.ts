// Run-completion webhooks, signed per the Standard Webhooks scheme: headers
// webhook-id, webhook-timestamp and webhook-signature `v1,<base64 HMAC-SHA256
// of "id.timestamp.body">`. Deliveries never block the run: they are retried on
// a backoff schedule in the background, through the egress guard, and each
// attempt is logged on the run. Pending deliveries live in the outbox of the
// store of record, so a restart resumes their schedule.
import { createHmac, randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import type { Logger } from '../log.ts';
import { pinnedLookup, resolvePublic } from '../net/egress.ts';
import type { Outbox, OutboxItem } from '../state/outbox.ts';

export interface WebhookTarget {
  url: string;
  /** file name under SERVICE_SECRETS_DIR; empty: deliveries go unsigned */
  secret_name: string;
}

export interface DeliveryAttempt {
  attempt: number;
  at: string;
  status: number | null;
  error: string | null;
  duration_ms: number;
}

export interface WebhookOptions {
  secretsDir: string;
  allowPrivate: boolean;
  /** seconds to wait before each retry */
  retrySchedule: number[];
  timeoutMs: number;
  log: Logger;
  /** called after every attempt so the run's delivery log stays current */
  record(runId: string, attempt: DeliveryAttempt, done: boolean): Promise<void>;
}

/**
 * The Standard Webhooks signing key, as the reference library derives it: the
 * secret is base64 with an optional `whsec_` prefix. A secret that is not valid
 * base64 is refused (a delivery error) rather than signed with a key no
 * receiver's library would derive.
 */
export function signingKey(secret: string): Buffer {
  const s = secret.trim();
  const b64 = s.startsWith('whsec_') ? s.slice('whsec_'.length) : s;
  if (b64 === '' || !/^[A-Za-z0-9+/]+={0,2}$/.test(b64) || b64.length % 4 === 1) throw new Error('webhook secret must be base64 (optionally prefixed whsec_), as Standard Webhooks libraries expect');
  return Buffer.from(b64, 'base64');
}

export function sign(key: Buffer, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

const SECRET_NAME = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;

/** A first delivery of `payload` to `target`, due now; its id is the webhook-id of every retry. */
export function outboxItem(runId: string, target: WebhookTarget, payload: Record<string, unknown>): OutboxItem {
  return { id: `msg_${randomUUID()}`, run_id: runId, target: JSON.stringify(target), payload: JSON.stringify(payload), attempt: 1, due_at: Date.now() };
}

export class Webhooks {
  private timer: NodeJS.Timeout | undefined;
  private pumping: Promise<void> | undefined;
  private again = false;
  private closed = false;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly opts: WebhookOptions,
    private readonly outbox: Outbox,
  ) {}

  private async secret(name: string): Promise<Buffer | undefined> {
    if (!name) return undefined;
    if (!SECRET_NAME.test(name)) throw new Error('webhook_secret_name is not a valid file name');
    return signingKey(await readFile(path.join(this.opts.secretsDir, name), 'utf8'));
  }

  /** Delivers what the outbox holds from earlier processes, and what is added from now on. */
  start(): void {
    this.wake(0);
  }

  /** Puts a delivery in the outbox (stored before this returns); it is attempted in the background. */
  async deliver(runId: string, target: WebhookTarget, payload: Record<string, unknown>): Promise<void> {
    await this.outbox.add(outboxItem(runId, target, payload));
    this.added();
  }

  /** An item the caller stored in the outbox itself (in the transaction of a run's ending) is due now. */
  added(): void {
    this.wake(0);
  }

  private wake(inMs: number): void {
    if (this.closed) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.pump(), inMs);
    this.timer.unref();
  }

  /** Attempts every due delivery, then sleeps until the next one falls due (at most a second, for items other replicas add). */
  private async pump(): Promise<void> {
    this.pumping = (async () => {
      try {
        const lease = this.opts.timeoutMs + 5_000;
        for (const item of await this.outbox.take(Date.now(), 20, lease)) {
          const p = this.attempt(item).finally(() => this.inFlight.delete(p));
          this.inFlight.add(p);
        }
      } catch (err) {
        this.opts.log.warn({ err: (err as Error).message }, 'webhook outbox could not be read; retrying');
      }
    })();
    await this.pumping;
    this.pumping = undefined;
    const next = await this.outbox.nextDue().catch(() => undefined);
    const wait = this.again ? 0 : next === undefined ? 1000 : Math.min(1000, Math.max(20, next - Date.now()));
    this.again = false;
    this.wake(wait);
  }

  private async attempt(item: OutboxItem): Promise<void> {
    const target = JSON.parse(item.target) as WebhookTarget;
    const n = item.attempt;
    const started = Date.now();
    let status: number | null = null;
    let error: string | null = null;
    try {
      const key = await this.secret(target.secret_name);
      const ts = Math.floor(Date.now() / 1000);
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        'user-agent': 'runplane-webhooks/1',
        'webhook-id': item.id,
        'webhook-timestamp': String(ts),
      };
      if (key) headers['webhook-signature'] = sign(key, item.id, ts, item.payload);
      status = await this.post(target.url, headers, item.payload);
      if (status < 200 || status >= 300) error = `receiver answered ${status}`;
    } catch (err) {
      error = (err as Error).message.slice(0, 300);
    }
    const ok = error === null;
    const last = ok || n > this.opts.retrySchedule.length;
    try {
      if (last) await this.outbox.remove(item.id);
      else await this.outbox.reschedule(item.id, n + 1, Date.now() + this.opts.retrySchedule[n - 1]! * 1000);
    } catch (err) {
      // the lease runs out and the attempt is made again: at least once
      this.opts.log.warn({ run_id: item.run_id, err: (err as Error).message }, 'webhook outbox not updated');
    }
    await this.opts
      .record(item.run_id, { attempt: n, at: new Date(started).toISOString(), status, error, duration_ms: Date.now() - started }, last)
      .catch((err: unknown) => this.opts.log.warn({ run_id: item.run_id, err: (err as Error).message }, 'webhook delivery log not saved'));
    if (!ok && last) this.opts.log.warn({ run_id: item.run_id, attempts: n }, 'webhook delivery gave up');
    if (!last) this.wake(0);
  }

  private async post(url: string, headers: Record<string, string>, body: string): Promise<number> {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('webhook URL must be http or https');
    const { address, family } = await resolvePublic(u.hostname, this.opts.allowPrivate);
    const mod = u.protocol === 'https:' ? https : http;
    return new Promise<number>((resolve, reject) => {
      const req = mod.request(
        u,
        { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, lookup: pinnedLookup(address, family), timeout: this.opts.timeoutMs },
        (res) => {
          // redirects are not followed: a 3xx is a failed delivery
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer within ${this.opts.timeoutMs} ms`)));
      req.on('error', reject);
      req.end(body);
    });
  }

  /** Stops attempting; waits for the attempts in flight (each bounded by the timeout). Pending items stay in the outbox. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    await this.pumping;
    await Promise.allSettled([...this.inFlight]);
  }
}
