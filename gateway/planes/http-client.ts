// The spec's HTTP wire contract as a PlaneTransport: JSON bodies, X-Service-Session,
// `Authorization: Bearer <agent secret>`, a hard deadline per call.
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { PlaneCallError, type CallOptions, type CallReply, type PlaneHealth, type PlaneTransport, type TransportOptions } from './types.ts';

export class HttpTransport implements PlaneTransport {
  readonly kind = 'http' as const;
  private readonly base: URL;
  private readonly agent: HttpAgent;
  private readonly https: boolean;

  constructor(
    url: string,
    private readonly opts: TransportOptions = {},
  ) {
    this.base = new URL(url);
    this.https = this.base.protocol === 'https:';
    this.agent = this.https ? new HttpsAgent({ keepAlive: true, ca: opts.ca }) : new HttpAgent({ keepAlive: true });
  }

  async call(method: string, body: Record<string, unknown>, o: CallOptions): Promise<CallReply> {
    const payload = o.verb === 'POST' ? JSON.stringify(o.stepId ? { ...body, step_id: o.stepId } : body) : undefined;
    const out = await this.send(o.verb, `/${method}`, payload, o.sessionToken, o.deadlineMs);
    if (Buffer.isBuffer(out.raw)) {
      const blob = out.raw;
      delete out.raw;
      return { body: out, blob };
    }
    if (typeof out.image_b64 === 'string') {
      const blob = Buffer.from(out.image_b64, 'base64');
      delete out.image_b64;
      return { body: out, blob };
    }
    return { body: out };
  }

  async health(deadlineMs: number): Promise<PlaneHealth> {
    return (await this.send('GET', '/health', undefined, undefined, deadlineMs)) as unknown as PlaneHealth;
  }

  disconnect(): void {
    this.agent.destroy();
  }

  private send(verb: 'GET' | 'POST', path: string, payload: string | undefined, token: string | undefined, deadlineMs: number): Promise<Record<string, unknown>> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (payload !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(Buffer.byteLength(payload));
    }
    if (token) headers['x-service-session'] = token;
    if (this.opts.secret) headers.authorization = `Bearer ${this.opts.secret}`;
    // SNI carries host names only (RFC 6066); an IP address is checked against the certificate's IP SAN.
    const sni = this.https && isIP(this.base.hostname.replace(/^\[|\]$/g, '')) ? { servername: '' } : {};
    const req = (this.https ? httpsRequest : httpRequest)(new URL(path, this.base), { method: verb, headers, agent: this.agent, ...sni });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        req.destroy();
        reject(new PlaneCallError(504, `no reply from plane agent within ${deadlineMs} ms`, 'timeout'));
      }, deadlineMs);
      req.once('error', (err) => {
        clearTimeout(timer);
        reject(new PlaneCallError(503, `plane agent unreachable: ${err.message}`, 'unavailable'));
      });
      req.once('response', (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.once('error', (err) => {
          clearTimeout(timer);
          reject(new PlaneCallError(503, `plane agent connection lost: ${err.message}`, 'unavailable'));
        });
        res.once('end', () => {
          clearTimeout(timer);
          const status = res.statusCode ?? 500;
          const type = String(res.headers['content-type'] ?? '');
          // Binary answers (the recording) come as themselves, not as JSON.
          if (status === 200 && !type.startsWith('application/json')) {
            resolve({ raw: Buffer.concat(chunks), content_type: type });
            return;
          }
          let parsed: Record<string, unknown> = {};
          try {
            parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
          } catch {
            reject(new PlaneCallError(res.statusCode ?? 502, 'plane agent sent a non-JSON reply', 'internal'));
            return;
          }
          if (status === 200) resolve(parsed);
          else reject(new PlaneCallError(status, typeof parsed.detail === 'string' ? parsed.detail : `HTTP ${status}`));
        });
      });
      req.end(payload);
    });
  }
}
