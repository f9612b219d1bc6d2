// A fixture page that reports what a person does to it: each click (where, on what,
// when by the page's clock), each key down (key, code, Control), each change of its
// text field (the value), each wheel and scroll, posted back to this server as they
// happen. The live screen's tests and bench drive the page through the viewer and
// read here what the page itself saw.
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';

export interface Seen {
  kind: 'click' | 'keydown' | 'input' | 'wheel' | 'scroll' | 'mousedown';
  x?: number;
  y?: number;
  target?: string;
  key?: string;
  code?: string;
  ctrl?: boolean;
  value?: string;
  dy?: number;
  scroll_y?: number;
  button?: number;
  /** Date.now() in the page when the event fired */
  t: number;
}

export interface InputSite {
  url: string;
  seen: Seen[];
  /** resolves with the first event (from now on) that `pred` accepts */
  next(pred: (s: Seen) => boolean, ms?: number): Promise<Seen>;
  close(): Promise<void>;
}

const PAD = `<!doctype html><html><head><meta charset="utf-8"><title>Input pad</title>
<style>html,body{margin:0;padding:0;font:16px sans-serif} #field{position:absolute;left:100px;top:100px;width:400px;height:40px;font-size:20px}
#target{position:fixed;left:600px;top:300px;width:200px;height:120px;background:#4caf50;color:#fff} #tall{height:4000px;background:linear-gradient(#fff,#ccd)}</style></head>
<body><div id="tall"></div><input id="field" autocomplete="off"><div id="target">target</div>
<script>
const report = (e) => fetch('/report', { method: 'POST', body: JSON.stringify({ ...e, t: Date.now() }), keepalive: true });
const id = (el) => (el && el.id) || (el && el.tagName) || '';
addEventListener('click', (e) => report({ kind: 'click', x: e.clientX, y: e.clientY, target: id(e.target) }), true);
// the page keeps its right button for itself (a headful browser's own menu would take the next click)
addEventListener('contextmenu', (e) => e.preventDefault());
addEventListener('mousedown', (e) => report({ kind: 'mousedown', x: e.clientX, y: e.clientY, button: e.button, target: id(e.target) }), true);
addEventListener('keydown', (e) => report({ kind: 'keydown', key: e.key, code: e.code, ctrl: e.ctrlKey, target: id(e.target) }), true);
document.getElementById('field').addEventListener('input', (e) => report({ kind: 'input', value: e.target.value }));
addEventListener('wheel', (e) => report({ kind: 'wheel', x: e.clientX, y: e.clientY, dy: e.deltaY }), { capture: true, passive: true });
let last = 0;
addEventListener('scroll', () => { if (Math.abs(scrollY - last) > 0) { last = scrollY; report({ kind: 'scroll', scroll_y: scrollY }); } });
</script></body></html>`;

/** A page whose every frame is new noise: the largest JPEGs a live screen can send, as fast as it sends them. */
const NOISE = `<!doctype html><html><head><meta charset="utf-8"><title>Noise</title><style>html,body{margin:0}canvas{display:block}</style></head>
<body><canvas id="c" width="1280" height="720"></canvas><script>
const g = document.getElementById('c').getContext('2d');
const img = g.createImageData(1280, 720);
const px = new Uint32Array(img.data.buffer);
const draw = () => { for (let i = 0; i < px.length; i++) px[i] = (Math.random() * 0xffffffff) | 0xff000000; g.putImageData(img, 0, 0); requestAnimationFrame(draw); };
draw();
</script></body></html>`;

export async function startInputSite(): Promise<InputSite> {
  const seen: Seen[] = [];
  const waiters = new Set<(s: Seen) => void>();
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://pad.local');
    if (u.pathname === '/report' && req.method === 'POST') {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (d: string) => (body += d.length + body.length < 100_000 ? d : ''));
      req.on('end', () => {
        try {
          const s = JSON.parse(body) as Seen;
          seen.push(s);
          for (const w of [...waiters]) w(s);
        } catch {
          // not a report
        }
        res.writeHead(204).end();
      });
      return;
    }
    if (u.pathname === '/noise') return void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(NOISE);
    if (u.pathname === '/pad') return void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAD);
    res.writeHead(404).end();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    next(pred, ms = 20_000) {
      return new Promise<Seen>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(w);
          reject(new Error(`the page saw no such event within ${ms} ms (saw ${JSON.stringify(seen.slice(-5))})`));
        }, ms);
        const w = (s: Seen): void => {
          if (!pred(s)) return;
          clearTimeout(timer);
          waiters.delete(w);
          resolve(s);
        };
        waiters.add(w);
      });
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
