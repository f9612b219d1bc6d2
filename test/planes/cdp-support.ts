// A stand-in for the gateway's CDP route in plane tests and benches: a local `ws` server
// whose every connection is one Cdp stream (openCdpStream) to an agent, frames relayed
// both ways, so an unmodified client (puppeteer.connect) runs through the agent's relay.
import { once } from 'node:events';
import { WebSocketServer, type WebSocket } from 'ws';
import { openCdpStream, type CdpStream } from '../../gateway/planes/index.ts';

export interface CdpBridge {
  /** ws://127.0.0.1:<port>/ for browserWSEndpoint */
  url: string;
  /** why each stream ended, in the order they ended */
  reasons: string[];
  close(): Promise<void>;
}

export async function cdpBridge(agentUrl: string, token: () => string): Promise<CdpBridge> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false, maxPayload: 256 * 1024 * 1024 });
  await once(wss, 'listening');
  const reasons: string[] = [];
  const open = new Set<{ ws: WebSocket; stream: CdpStream }>();
  wss.on('connection', (ws) => {
    const stream = openCdpStream({ url: agentUrl, token: token() });
    const pair = { ws, stream };
    open.add(pair);
    stream.onMessage((data) => ws.send(data));
    stream.onClose((reason) => {
      reasons.push(reason);
      open.delete(pair);
      ws.close(1011, reason.slice(0, 100));
    });
    ws.on('message', (d: Buffer) => stream.send(d.toString('utf8')));
    ws.on('close', () => stream.close());
  });
  const addr = wss.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    url: `ws://127.0.0.1:${port}/`,
    reasons,
    async close() {
      for (const p of open) p.stream.close();
      for (const c of wss.clients) c.terminate();
      await new Promise<void>((r) => wss.close(() => r()));
    },
  };
}

/** A raw Cdp stream with a promise per command, the ids of every answer it got, and the stream's end as a promise. */
export function rawCdp(agentUrl: string, token: string): { ids: number[]; send(method: string, params?: Record<string, unknown>, sessionId?: string): Promise<Record<string, unknown>>; ended: Promise<string>; stream: CdpStream } {
  const stream = openCdpStream({ url: agentUrl, token });
  let next = 1;
  const pending = new Map<number, (m: Record<string, unknown>) => void>();
  const ids: number[] = [];
  stream.onMessage((data) => {
    const m = JSON.parse(data) as Record<string, unknown>;
    if (typeof m.id === 'number') {
      ids.push(m.id);
      pending.get(m.id)?.(m);
    }
  });
  const ended = new Promise<string>((r) => stream.onClose(r));
  return {
    ids,
    stream,
    ended,
    send(method, params = {}, sessionId) {
      const id = next++;
      return new Promise((resolve) => {
        pending.set(id, resolve);
        stream.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
      });
    },
  };
}
