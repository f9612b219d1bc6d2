// The gateway's end of a Cdp stream: one root CDP connection to a plane session's
// browser, relayed (and filtered) by its agent. One text frame per CDP message both
// ways. Cdp streams to one agent share a channel of their own (never GrpcTransport's:
// a session's CDP clients come and go while its Session stream stays), opened ahead by
// the session's owner (warmCdpChannel) so a client's connect does not pay for the
// channel's TCP and HTTP/2 handshakes, and closed LINGER_MS after its last stream.
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
/** How long an agent's channel stays open after its last Cdp stream (a client re-attaching, a session's next one). */
const LINGER_MS = 30_000;

type AgentClient = InstanceType<ReturnType<typeof loadPlaneProto>['runplane']['plane']['PlaneAgent']>;
interface Shared {
  client: AgentClient;
  users: number;
  linger?: NodeJS.Timeout;
}
/** channels by agent url, secret and CA: the secret is part of the key, so a channel is never used with another's credentials */
const channels = new Map<string, Shared>();
const keyOf = (o: Omit<CdpStreamOptions, 'token'>): string => JSON.stringify([o.url, o.secret ?? '', o.ca?.toString('base64') ?? '']);

function channel(o: Omit<CdpStreamOptions, 'token'>): { client: AgentClient; release(broken: boolean): void } {
  const u = new URL(o.url);
  if (u.protocol !== 'grpc:' && u.protocol !== 'grpcs:') throw new Error(`a Cdp stream needs a grpc(s):// url, not ${u.protocol}`);
  const key = keyOf(o);
  let sh = channels.get(key);
  if (!sh) {
    const creds = u.protocol === 'grpcs:' ? grpc.credentials.createSsl(o.ca ?? null) : grpc.credentials.createInsecure();
    const client = new (loadPlaneProto().runplane.plane.PlaneAgent)(u.host, creds, {
      'grpc.max_receive_message_length': MAX_RECEIVE_BYTES,
      'grpc.max_send_message_length': MAX_RECEIVE_BYTES,
      'grpc.keepalive_time_ms': 10_000,
      'grpc.keepalive_timeout_ms': 5_000,
    });
    sh = { client, users: 0 };
    channels.set(key, sh);
  }
  const s = sh;
  if (s.linger) clearTimeout(s.linger);
  s.linger = undefined;
  s.users += 1;
  let released = false;
  const drop = (): void => {
    if (channels.get(key) === s) channels.delete(key);
    s.client.close();
  };
  return {
    client: s.client,
    release(broken) {
      if (released) return;
      released = true;
      s.users -= 1;
      // an agent that could not be reached (gone, restarted on another port) gets a fresh channel next time
      if (broken && channels.get(key) === s) channels.delete(key);
      if (s.users > 0) return;
      if (channels.get(key) !== s) return void s.client.close();
      s.linger = setTimeout(drop, LINGER_MS);
      s.linger.unref();
    },
  };
}

/** Opens (connects) the channel Cdp streams to this agent will use, before any client asks; it closes LINGER_MS after its last use. */
export function warmCdpChannel(o: Omit<CdpStreamOptions, 'token'>): void {
  try {
    const c = channel(o);
    c.client.getChannel().getConnectivityState(true);
    c.release(false);
  } catch {
    // a url that is not gRPC: the stream's own open will say so
  }
}

export function openCdpStream(o: CdpStreamOptions): CdpStream {
  const ch = channel(o);
  const client = ch.client;
  const md = new grpc.Metadata();
  if (o.secret) md.set('authorization', `Bearer ${o.secret}`);
  md.set('x-service-session', o.token);
  const call: grpc.ClientDuplexStream<CdpFrame, CdpFrame__Output> = client.Cdp(md);

  const messageFns: Array<(data: string) => void> = [];
  const closeFns: Array<(reason: string) => void> = [];
  let closedReason: string | undefined;
  let unreachable = false;
  const finish = (reason: string): void => {
    if (closedReason !== undefined) return;
    closedReason = reason;
    ch.release(unreachable);
    for (const fn of closeFns) fn(reason);
  };

  call.on('data', (f: CdpFrame__Output) => {
    if (closedReason !== undefined) return;
    for (const fn of messageFns) fn(f.data);
  });
  call.on('error', (err: grpc.ServiceError) => {
    // UNAVAILABLE is also how the agent ends a stream whose session closed: only a failed connection drops the channel
    unreachable = err.code === grpc.status.UNAVAILABLE && /connect|No connection|ECONNREFUSED/i.test(err.details || err.message);
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
