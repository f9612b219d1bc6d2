// The gRPC transport over the core: one bidi Session stream per plane session, each
// request answered by a reply with the same call_id. A stream ending or being
// cancelled never closes the plane session; the client may reattach with its token.
// When the session is lost (its browser died), the agent tells the session's streams
// at once with an unsolicited reply: call_id 0, status 410, {detail, event: "session_lost"}.
import * as grpc from '@grpc/grpc-js';
import { loadPlaneProto, type PlaneAgentHandlers, type PlaneReply, type PlaneRequest__Output } from '../../proto/load.ts';
import { grpcStatusOf, toPlaneError } from './errors.ts';
import { safeEqual, type PlaneCore } from './core.ts';
import { MAX_BODY_BYTES } from './http.ts';
import { serveCdp } from './grpc-cdp.ts';

export interface GrpcOptions {
  secret?: string;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
}

function meta(md: grpc.Metadata, key: string): string | undefined {
  const v = md.get(key)[0];
  return typeof v === 'string' && v !== '' ? v : undefined;
}

function secretOk(md: grpc.Metadata, secret: string | undefined): boolean {
  if (!secret) return true;
  const m = /^Bearer (.+)$/.exec(meta(md, 'authorization') ?? '');
  return m !== null && safeEqual(m[1] ?? '', secret);
}

async function answer(core: PlaneCore, req: PlaneRequest__Output, streamToken: string | undefined): Promise<PlaneReply> {
  const base = { call_id: req.call_id };
  try {
    if (req.deadline_unix_ms && req.deadline_unix_ms < Date.now()) {
      return { ...base, status: 504, body_json: JSON.stringify({ detail: 'deadline passed before the call started' }) };
    }
    if (req.body_json.length > MAX_BODY_BYTES) return { ...base, status: 413, body_json: JSON.stringify({ detail: 'body too large' }) };
    let body: unknown = {};
    if (req.body_json !== '') {
      try {
        body = JSON.parse(req.body_json) as unknown;
      } catch {
        return { ...base, status: 400, body_json: JSON.stringify({ detail: 'malformed JSON body' }) };
      }
    }
    const result = await core.call({
      method: req.method.replace(/^\/+/, ''),
      sessionToken: req.session_token || streamToken,
      stepId: req.step_id || undefined,
      body,
      ...(req.blob && req.blob.length > 0 ? { blob: Buffer.from(req.blob) } : {}),
    });
    return { ...base, status: 200, body_json: JSON.stringify(result.body), blob: result.blob ?? Buffer.alloc(0) };
  } catch (err) {
    const pe = toPlaneError(err);
    return { ...base, status: pe.status, body_json: JSON.stringify({ detail: pe.detail }) };
  }
}

/** Largest message the agent's gRPC server accepts (a CDP frame with a large script). */
export const MAX_CDP_FRAME_BYTES = 16 * 1024 * 1024;

export function grpcServer(core: PlaneCore, opts: GrpcOptions = {}): grpc.Server {
  const proto = loadPlaneProto();
  // CDP frames from a client may be large (a whole script); the Session route keeps its own MAX_BODY_BYTES check
  const server = new grpc.Server({ 'grpc.max_receive_message_length': MAX_CDP_FRAME_BYTES });
  const handlers: PlaneAgentHandlers = {
    Health(call, callback) {
      if (!secretOk(call.metadata, opts.secret)) {
        callback({ code: grpcStatusOf(401), details: 'missing or wrong agent secret' });
        return;
      }
      const h = core.health();
      callback(null, {
        ok: h.ok,
        backend: h.backend,
        session_bound: h.session_bound,
        last_action_unix_ms: h.last_action_ms ?? 0,
        uptime_ms: h.uptime_ms,
        pool_ready: h.pool_ready,
        pool_capacity: h.pool_capacity,
      });
    },
    Cdp(call) {
      if (!secretOk(call.metadata, opts.secret)) {
        call.emit('error', { code: grpcStatusOf(401), details: 'missing or wrong agent secret' });
        return;
      }
      serveCdp(core, call, meta(call.metadata, 'x-service-session'), opts.log);
    },
    Session(call) {
      if (!secretOk(call.metadata, opts.secret)) {
        call.emit('error', { code: grpcStatusOf(401), details: 'missing or wrong agent secret' });
        return;
      }
      let streamToken = meta(call.metadata, 'x-service-session');
      let open = true;
      let inFlight = 0;
      let ended = false;
      const unsubscribe = core.onSessionLost((token, reason) => {
        if (!open || !streamToken || !safeEqual(token, streamToken)) return;
        call.write({ call_id: 0, status: 410, body_json: JSON.stringify({ detail: reason, event: 'session_lost' }), blob: Buffer.alloc(0) });
      });
      const finish = (): void => {
        if (open && ended && inFlight === 0) {
          open = false;
          unsubscribe();
          call.end();
        }
      };
      call.on('data', (req: PlaneRequest__Output) => {
        inFlight += 1;
        void answer(core, req, streamToken).then((reply) => {
          inFlight -= 1;
          // The stream that ran init carries its token for the calls that follow.
          if (reply.status === 200 && req.method.replace(/^\/+/, '') === 'session/init') {
            const t = (JSON.parse(reply.body_json ?? '{}') as { session_token?: string }).session_token;
            if (t) streamToken = t;
          }
          if (open) call.write(reply);
          finish();
        });
      });
      call.on('end', () => {
        ended = true;
        finish();
      });
      call.on('cancelled', () => {
        open = false;
        unsubscribe();
      });
      call.on('error', (err) => {
        open = false;
        unsubscribe();
        opts.log?.('session stream error', { err: String(err) });
      });
    },
  };
  server.addService(proto.runplane.plane.PlaneAgent.service, handlers);
  return server;
}
