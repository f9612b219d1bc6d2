// Run-completion webhooks, signed per the Standard Webhooks scheme: headers
// webhook-id, webhook-timestamp and webhook-signature `v1,<base64 HMAC-SHA256
// of "id.timestamp.body">`. Deliveries never block the run: they are retried on
// a backoff schedule in the background, through the egress guard, and each
// attempt is logged on the run.
import { createHmac, randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import type { Logger } from '../log.ts';
import { pinnedLookup, resolvePublic } from '../net/egress.ts';

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

/** The Standard Webhooks signing key: `whsec_<base64>` secrets are decoded, others used as bytes. */
export function signingKey(secret: string): Buffer {
  const s = secret.trim();
  return s.startsWith('whsec_') ? Buffer.from(s.slice('whsec_'.length), 'base64') : Buffer.from(s, 'utf8');
}

export function sign(key: Buffer, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

const SECRET_NAME = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;

export class Webhooks {
  private readonly timers = new Set<NodeJS.Timeout>();
  private closed = false;

  constructor(private readonly opts: WebhookOptions) {}

  private async secret(name: string): Promise<Buffer | undefined> {
    if (!name) return undefined;
    if (!SECRET_NAME.test(name)) throw new Error('webhook_secret_name is not a valid file name');
    return signingKey(await readFile(path.join(this.opts.secretsDir, name), 'utf8'));
  }

  /** Starts delivering in the background; returns at once. */
  deliver(runId: string, target: WebhookTarget, payload: Record<string, unknown>): void {
    const id = `msg_${randomUUID()}`;
    const body = JSON.stringify(payload);
    const attempt = async (n: number): Promise<void> => {
      if (this.closed) return;
      const started = Date.now();
      let status: number | null = null;
      let error: string | null = null;
      try {
        const key = await this.secret(target.secret_name);
        const ts = Math.floor(Date.now() / 1000);
        const headers: Record<string, string> = {
          'content-type': 'application/json',
          'user-agent': 'runplane-webhooks/1',
          'webhook-id': id,
          'webhook-timestamp': String(ts),
        };
        if (key) headers['webhook-signature'] = sign(key, id, ts, body);
        status = await this.post(target.url, headers, body);
        if (status < 200 || status >= 300) error = `receiver answered ${status}`;
      } catch (err) {
        error = (err as Error).message.slice(0, 300);
      }
      const ok = error === null;
      const last = ok || n > this.opts.retrySchedule.length;
      await this.opts
        .record(runId, { attempt: n, at: new Date(started).toISOString(), status, error, duration_ms: Date.now() - started }, last)
        .catch((err: unknown) => this.opts.log.warn({ run_id: runId, err: (err as Error).message }, 'webhook delivery log not saved'));
      if (ok) return;
      if (last) {
        this.opts.log.warn({ run_id: runId, attempts: n }, 'webhook delivery gave up');
        return;
      }
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        void attempt(n + 1);
      }, this.opts.retrySchedule[n - 1]! * 1000);
      timer.unref();
      this.timers.add(timer);
    };
    void attempt(1);
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

  close(): void {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}
