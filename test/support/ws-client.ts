// A WebSocket client for tests of the gateway's sockets: an upgrade that answers the
// refusal's status and body (a refused upgrade is a plain HTTP answer), and the JSON
// messages a socket got, kept from its first (which may come with the upgrade's answer).
import WebSocket from 'ws';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The JSON messages a socket got so far (kept from its first, which may come with the upgrade's answer). */
const received = new WeakMap<WebSocket, Body[]>();

export function upgrade(url: string, headers: Record<string, string> = {}, protocols: string[] = []): Promise<{ status: number; body: string; ws?: WebSocket }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, protocols, { headers });
    const got: Body[] = [];
    received.set(ws, got);
    ws.on('message', (data: Buffer, binary: boolean) => void (binary ? undefined : got.push(JSON.parse(data.toString()) as Body)));
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.on('open', () => resolve({ status: 101, body: '', ws }));
    ws.on('error', () => undefined);
  });
}

/** The first JSON message of `ws` not taken yet that `pred` accepts (taken by this call). */
export function message(ws: WebSocket, pred: (m: Body) => boolean, ms = 20_000): Promise<Body> {
  const got = received.get(ws)!;
  return new Promise((resolve, reject) => {
    const look = (): boolean => {
      const i = got.findIndex(pred);
      if (i < 0) return false;
      clearTimeout(timer);
      ws.off('message', on);
      resolve(got.splice(i, 1)[0]!);
      return true;
    };
    const timer = setTimeout(() => {
      ws.off('message', on);
      reject(new Error(`no such message (got ${JSON.stringify(got).slice(0, 300)})`));
    }, ms);
    // after the collector above has kept it
    const on = (): void => void setImmediate(look);
    ws.on('message', on);
    look();
  });
}

