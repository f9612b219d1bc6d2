// The gateway's end of a Cdp stream: one root CDP connection to a plane session's
// browser, relayed (and filtered) by its agent. One text frame per CDP message both
// ways. The channel is per stream: a session's CDP clients come and go (re-attach)
// while the session's own Session stream stays, so nothing is shared with GrpcTransport.
import * as grpc from '@grpc/grpc-js';
import { loadPlaneProto, type CdpFrame, type CdpFrame__Output } from '../../proto/load.ts';

export interface CdpStreamOptions {
  /** grpc://host:port or grpcs://host:port of the agent slot holding the session */
  url: string;
  /** agent secret, sent as `authorization: Bearer` */
  secret?: string;
  /** PEM of the CA (or self-signed cert) to trust for grpcs:// */
  ca?: Buffer;
  /** the plane session's token (x-service-session) */
  token: string;
}

export interface CdpStream {
  send(data: string): void;
  onMessage(fn: (data: string) => void): void;
  /** Called once: the agent ended the stream (its reason), an error, or close(). */
  onClose(fn: (reason: string) => void): void;
  close(): void;
}

/** The agent accepts frames up to 16 MB from a client (large scripts); the browser may send more. */
const MAX_RECEIVE_BYTES = 256 * 1024 * 1024;

export function openCdpStream(o: CdpStreamOptions): CdpStream {
  const u = new URL(o.url);
  if (u.protocol !== 'grpc:' && u.protocol !== 'grpcs:') throw new Error(`a Cdp stream needs a grpc(s):// url, not ${u.protocol}`);
  const proto = loadPlaneProto();
  const creds = u.protocol === 'grpcs:' ? grpc.credentials.createSsl(o.ca ?? null) : grpc.credentials.createInsecure();
  const client = new proto.runplane.plane.PlaneAgent(u.host, creds, {
    'grpc.max_receive_message_length': MAX_RECEIVE_BYTES,
    'grpc.max_send_message_length': MAX_RECEIVE_BYTES,
    'grpc.keepalive_time_ms': 10_000,
    'grpc.keepalive_timeout_ms': 5_000,
  });
  const md = new grpc.Metadata();
  if (o.secret) md.set('authorization', `Bearer ${o.secret}`);
  md.set('x-service-session', o.token);
  const call: grpc.ClientDuplexStream<CdpFrame, CdpFrame__Output> = client.Cdp(md);

  const messageFns: Array<(data: string) => void> = [];
  const closeFns: Array<(reason: string) => void> = [];
  let closedReason: string | undefined;
  const finish = (reason: string): void => {
    if (closedReason !== undefined) return;
    closedReason = reason;
    client.close();
    for (const fn of closeFns) fn(reason);
  };

  call.on('data', (f: CdpFrame__Output) => {
    if (closedReason !== undefined) return;
    for (const fn of messageFns) fn(f.data);
  });
  call.on('error', (err: grpc.ServiceError) => {
    if (err.code === grpc.status.CANCELLED) finish(closedReason ?? 'closed');
    else finish(err.details || err.message);
  });
  // The agent always ends with a status; a plain end without one is still an end.
  call.on('status', (s: grpc.StatusObject) => {
    if (s.code === grpc.status.OK) finish('the agent ended the stream');
  });

  return {
    send(data) {
      if (closedReason === undefined) call.write({ data });
    },
    onMessage(fn) {
      messageFns.push(fn);
    },
    onClose(fn) {
      if (closedReason !== undefined) queueMicrotask(() => fn(closedReason!));
      else closeFns.push(fn);
    },
    close() {
      if (closedReason !== undefined) return;
      finish('closed');
      call.cancel();
    },
  };
}
