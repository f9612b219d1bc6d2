// The gRPC PlaneTransport: one Session stream multiplexing calls by call_id. A stream
// that errors, ends or stops answering fails its pending calls with a clear class
// (unavailable / timeout) and is reopened, with the session token, on the next call.
// The agent's unsolicited reply (call_id 0, status 410) says the session is lost; it
// and a stream going down are passed to the session as events.
import * as grpc from '@grpc/grpc-js';
import { loadPlaneProto, type PlaneAgentClient, type PlaneReply__Output, type PlaneRequest } from '../../proto/load.ts';
import { PlaneCallError, type CallOptions, type CallReply, type PlaneHealth, type PlaneTransport, type TransportEvent, type TransportOptions } from './types.ts';

interface Pending {
  resolve: (r: CallReply) => void;
  reject: (e: PlaneCallError) => void;
  timer: NodeJS.Timeout;
}

export class GrpcTransport implements PlaneTransport {
  readonly kind = 'grpc' as const;
  private readonly client: PlaneAgentClient;
  private stream: grpc.ClientDuplexStream<PlaneRequest, PlaneReply__Output> | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private readonly listeners = new Set<(e: TransportEvent) => void>();
  private closed = false;

  constructor(
    target: string,
    tls: boolean,
    private readonly opts: TransportOptions = {},
  ) {
    const proto = loadPlaneProto();
    const creds = tls ? grpc.credentials.createSsl(opts.ca ? Buffer.from(opts.ca) : null) : grpc.credentials.createInsecure();
    this.client = new proto.runplane.plane.PlaneAgent(target, creds, {
      'grpc.max_receive_message_length': 64 * 1024 * 1024,
      'grpc.keepalive_time_ms': 10_000,
      'grpc.keepalive_timeout_ms': 5_000,
    });
  }

  private metadata(token?: string): grpc.Metadata {
    const md = new grpc.Metadata();
    if (this.opts.secret) md.set('authorization', `Bearer ${this.opts.secret}`);
    if (token) md.set('x-service-session', token);
    return md;
  }

  private openStream(token?: string): grpc.ClientDuplexStream<PlaneRequest, PlaneReply__Output> {
    if (this.stream) return this.stream;
    const stream = this.client.Session(this.metadata(token));
    stream.on('data', (reply: PlaneReply__Output) => {
      if (reply.call_id === 0) {
        if (reply.status === 410) this.emit({ type: 'lost', detail: detailOf(reply.body_json) ?? 'the session is lost' });
        return;
      }
      const p = this.pending.get(reply.call_id);
      if (!p) return;
      this.pending.delete(reply.call_id);
      clearTimeout(p.timer);
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(reply.body_json || '{}') as Record<string, unknown>;
      } catch {
        p.reject(new PlaneCallError(502, 'plane agent sent a non-JSON reply', 'internal'));
        return;
      }
      if (reply.status === 200) p.resolve(reply.blob.length ? { body, blob: Buffer.from(reply.blob) } : { body });
      else p.reject(new PlaneCallError(reply.status, typeof body.detail === 'string' ? body.detail : `status ${reply.status}`));
    });
    const fail = (err: PlaneCallError): void => {
      const mine = this.stream === stream;
      if (mine) this.stream = undefined;
      for (const [id, p] of this.pending) {
        clearTimeout(p.timer);
        this.pending.delete(id);
        p.reject(err);
      }
      // The agent may be gone: the session checks (a stream we dropped ourselves is not news).
      if (mine && !this.closed) this.emit({ type: 'down', detail: err.detail });
    };
    stream.on('error', (err: grpc.ServiceError) => {
      if (err.code === grpc.status.UNAUTHENTICATED) fail(new PlaneCallError(401, err.details || 'unauthenticated', 'unauthorized'));
      else if (err.code === grpc.status.CANCELLED) fail(new PlaneCallError(503, 'session stream cancelled', 'unavailable'));
      else fail(new PlaneCallError(503, `plane agent unreachable: ${err.details || err.message}`, 'unavailable'));
    });
    stream.on('end', () => fail(new PlaneCallError(503, 'plane agent closed the session stream', 'unavailable')));
    this.stream = stream;
    return stream;
  }

  call(method: string, body: Record<string, unknown>, o: CallOptions): Promise<CallReply> {
    const stream = this.openStream(o.sessionToken);
    const call_id = this.nextId++;
    return new Promise<CallReply>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(call_id);
        reject(new PlaneCallError(504, `no reply from plane agent within ${o.deadlineMs} ms`, 'timeout'));
        // A stream that stops answering is dropped; the retry opens a fresh one.
        if (this.stream === stream) {
          this.stream = undefined;
          stream.cancel();
        }
      }, o.deadlineMs);
      this.pending.set(call_id, { resolve, reject, timer });
      stream.write({
        call_id,
        method,
        step_id: o.stepId ?? '',
        body_json: JSON.stringify(body),
        session_token: o.sessionToken ?? '',
        deadline_unix_ms: Date.now() + o.deadlineMs,
        blob: o.blob ?? Buffer.alloc(0),
      });
    });
  }

  health(deadlineMs: number): Promise<PlaneHealth> {
    return new Promise((resolve, reject) => {
      this.client.Health({}, this.metadata(), { deadline: Date.now() + deadlineMs }, (err, r) => {
        if (err || !r) {
          const e = err as grpc.ServiceError | null;
          if (e?.code === grpc.status.UNAUTHENTICATED) reject(new PlaneCallError(401, e.details, 'unauthorized'));
          else if (e?.code === grpc.status.DEADLINE_EXCEEDED) reject(new PlaneCallError(504, 'health deadline exceeded', 'timeout'));
          else reject(new PlaneCallError(503, `plane agent unreachable: ${e?.details ?? 'no reply'}`, 'unavailable'));
          return;
        }
        resolve({ ok: r.ok, backend: r.backend, session_bound: r.session_bound, last_action_ms: r.last_action_unix_ms || null, uptime_ms: r.uptime_ms, pool_ready: r.pool_ready, pool_capacity: r.pool_capacity });
      });
    });
  }

  disconnect(): void {
    this.closed = true;
    this.stream?.cancel();
    this.stream = undefined;
    this.client.close();
  }

  onEvent(listener: (e: TransportEvent) => void): void {
    this.listeners.add(listener);
  }

  private emit(e: TransportEvent): void {
    for (const l of this.listeners) l(e);
  }
}

function detailOf(json: string): string | undefined {
  try {
    const d = (JSON.parse(json) as { detail?: unknown }).detail;
    return typeof d === 'string' ? d : undefined;
  } catch {
    return undefined;
  }
}
