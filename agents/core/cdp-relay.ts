// One Cdp stream's relay: a fresh root CDP connection (a `ws` client to the browser's
// debugging port, loopback) per stream, client->browser messages judged by cdp-filter.ts,
// browser->client messages passed unchanged. Before the client's first message goes
// through, the relay points every download of the browser at the session's folder (the
// default context, each existing context, and later each context the client creates):
// Chromium forgets a download setting when the connection that made it goes, so each
// connection sets it anew. The relay's own commands use negative ids, which clients
// cannot (the filter refuses them), and their answers are not passed on. A session's
// first root connection is opened at its start (primeRoot), off its client's connect.
import WebSocket from 'ws';
import { filterClientMessage, type FilterContext } from './cdp-filter.ts';

export interface RelayOptions extends FilterContext {
  /** ws://127.0.0.1:<port>/devtools/browser/<id> */
  endpoint: string;
  /** a root connection opened ahead to `endpoint` (primeRoot), used when still open */
  socket?: WebSocket;
  toClient(data: string): void;
  /** the browser's end of the connection went (once; not after close()) */
  onEnd(reason: string): void;
  /** each command the filter let through (the session's trace counts them) */
  onCommand?(method: string, params: Record<string, unknown>): void;
}

export interface Relay {
  /** A client message; false when it is not a CDP command at all (the stream should end). */
  fromClient(data: string): { ok: true } | { ok: false; why: string };
  close(): void;
}

/** A browser message is a response when it starts with its id (Chromium writes `{"id":N,...}`): read without parsing the rest. */
const RESPONSE_ID = /^\{"id":(-?\d+)[,}]/;

/** A large frame (a screenshot) is fine; the cap only guards the agent's memory. */
const MAX_PAYLOAD = 256 * 1024 * 1024;

const openRoot = (endpoint: string): WebSocket => new WebSocket(endpoint, { perMessageDeflate: false, maxPayload: MAX_PAYLOAD });

/**
 * A root connection to the browser at `endpoint` (once known), opened now and held unused
 * until a CDP stream takes it: nothing is sent on it before, so the browser sends nothing
 * (no domain is enabled) and the session's other users never see it. Measured at load 20,
 * its handshake cost a client's connect 10-90 ms.
 */
export function primeRoot(endpoint: Promise<string>): { take(): WebSocket | undefined; close(): void } {
  let ws: WebSocket | undefined;
  let closed = false;
  void endpoint.then(
    (e) => {
      if (closed) return;
      ws = openRoot(e);
      // a socket nobody took yet fails quietly: the stream then opens its own
      ws.on('error', () => undefined);
    },
    () => undefined,
  );
  return {
    take() {
      const w = ws;
      ws = undefined;
      return w && (w.readyState === WebSocket.OPEN || w.readyState === WebSocket.CONNECTING) ? w : undefined;
    },
    close() {
      closed = true;
      ws?.terminate();
      ws = undefined;
    },
  };
}

export function startRelay(o: RelayOptions): Relay {
  const ws = o.socket ?? openRoot(o.endpoint);
  let ready = false;
  let closed = false;
  const queue: string[] = [];
  let nextOwnId = -1;
  const own = new Map<number, (result: Record<string, unknown> | undefined) => void>();
  /** ids of the client's Target.createBrowserContext calls, answered with a context to set up */
  const creating = new Set<number>();

  const sendOwn = (method: string, params: Record<string, unknown>): Promise<Record<string, unknown> | undefined> =>
    new Promise((resolve) => {
      const id = nextOwnId--;
      own.set(id, resolve);
      ws.send(JSON.stringify({ id, method, params }));
    });
  const downloadsTo = (browserContextId?: string): Promise<unknown> =>
    sendOwn('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: o.downloadDir, ...(browserContextId ? { browserContextId } : {}) });

  const end = (reason: string): void => {
    if (closed) return;
    closed = true;
    o.onEnd(reason);
  };

  // One round trip before the client's messages go: the browser handles one connection's
  // commands in order, so the download settings sent before them apply before them.
  const setUp = (): void => {
    const known = o.contextId ? [o.contextId] : [];
    void downloadsTo();
    for (const c of known) void downloadsTo(c);
    void sendOwn('Target.getBrowserContexts', {}).then((contexts) => {
      const ids = Array.isArray(contexts?.browserContextIds) ? (contexts.browserContextIds as unknown[]).filter((c): c is string => typeof c === 'string') : [];
      for (const c of ids) if (!known.includes(c)) void downloadsTo(c);
      ready = true;
      for (const m of queue.splice(0)) ws.send(m);
    });
  };
  if (ws.readyState === WebSocket.OPEN) setUp();
  else ws.on('open', setUp);
  ws.on('message', (buf: Buffer) => {
    const text = buf.toString('utf8');
    const m = RESPONSE_ID.exec(text);
    if (m) {
      const id = Number(m[1]);
      if (id < 0) {
        const resolve = own.get(id);
        own.delete(id);
        const reply = JSON.parse(text) as { result?: Record<string, unknown> };
        resolve?.(reply.result);
        return;
      }
      if (creating.delete(id)) {
        const ctx = (JSON.parse(text) as { result?: { browserContextId?: unknown } }).result?.browserContextId;
        // sent before the client hears of the context, so nothing it does there can come first
        if (typeof ctx === 'string') void downloadsTo(ctx);
      }
    }
    if (!closed) o.toClient(text);
  });
  ws.on('close', (code, why) => end(`the browser's CDP connection closed (${code}${why.length ? ` ${why.toString()}` : ''})`));
  ws.on('error', (err) => end(`the browser's CDP connection failed: ${err.message}`));

  return {
    fromClient(data) {
      if (closed) return { ok: true };
      const v = filterClientMessage(data, o);
      if (v.kind === 'invalid') return { ok: false, why: v.why };
      if (v.kind === 'answer') {
        o.toClient(v.reply);
        return { ok: true };
      }
      if (v.method === 'Target.createBrowserContext' && v.sessionId === undefined) creating.add(v.id);
      o.onCommand?.(v.method, v.params);
      if (ready) ws.send(v.data);
      else queue.push(v.data);
      return { ok: true };
    },
    close() {
      closed = true;
      ws.on('error', () => undefined);
      if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
      else ws.close();
    },
  };
}
