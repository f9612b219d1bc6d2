// Test support for the plane agents: agent processes on port 0, fixture pages, a
// recording HTTP proxy, and process-tree inspection through /proc.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { connect } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { expect } from 'chai';
import sharp from 'sharp';
import { PlaneCallError, type PlaneSession } from '../../gateway/planes/index.ts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtPath } from '../../shared/build.mjs';

export interface AgentProc {
  child: ChildProcess;
  pid: number;
  httpPort: number;
  grpcPort: number;
  /** every session slot's ports (PLANE_CAPACITY) */
  slots: Array<{ http_port: number; grpc_port: number }>;
  dataDir: string;
  stderr: () => string;
  stop(): Promise<void>;
}

export async function startAgentProcess(plane: 'computer' | 'dom', env: Record<string, string> = {}): Promise<AgentProc> {
  const dataDir = mkdtempSync(join(tmpdir(), `plane-${plane}-`));
  const child = spawn(process.execPath, [builtPath(`agents/${plane}/main.ts`)], {
    // The fixtures are on loopback: the egress guard is off unless a test turns it on. PLANE_PARENT_PID: an agent
    // outlives a test run that ended before its after hooks (mocha's exit, a timeout, Ctrl-C) by a second, not forever.
    env: { ...process.env, PLANE_HTTP_PORT: '0', PLANE_GRPC_PORT: '0', PLANE_DATA_DIR: dataDir, PLANE_GRAB_FPS: '15', PLANE_ALLOW_PRIVATE_NETWORKS: '1', PLANE_PARENT_PID: String(process.pid), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr?.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`agent did not start: ${err}`)), 20_000);
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl >= 0) {
        clearTimeout(timer);
        resolve(out.slice(0, nl));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`agent exited with ${code}: ${err}`));
    });
  });
  const info = JSON.parse(line) as { http_port: number; grpc_port: number; slots: Array<{ http_port: number; grpc_port: number }> };
  return {
    child,
    pid: child.pid ?? 0,
    httpPort: info.http_port,
    grpcPort: info.grpc_port,
    slots: info.slots,
    dataDir,
    stderr: () => err,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await once(child, 'exit');
      clearTimeout(t);
    },
  };
}

const PAGE = (title: string, body: string): string =>
  `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title>
<style>body{margin:0;font:16px sans-serif} button,input,a{display:block;margin:10px;width:300px;height:40px}</style></head>
<body>${body}</body></html>`;

export interface Fixture {
  port: number;
  /** Base URL on 127.0.0.1. */
  url: string;
  /** Same server under `localhost`: a different origin for pin tests. */
  altUrl: string;
  hits: string[];
  close(): Promise<void>;
}

export async function startFixture(): Promise<Fixture> {
  const hits: string[] = [];
  const server: Server = createServer((req, res) => {
    hits.push(req.url ?? '');
    const path = (req.url ?? '/').split('?')[0];
    const pages: Record<string, string> = {
      '/counter': PAGE(
        'Counter',
        `<button id="inc" onclick="document.getElementById('count').textContent = String(Number(document.getElementById('count').textContent) + 1)">increment</button>
<div id="count">0</div>
<input id="name" aria-label="Your name">
<a id="ext" href="/other" target="_blank">open other</a>
<a id="plain" href="/page2">page two</a>`,
      ),
      '/other': PAGE('Other page', '<h1>other</h1>'),
      '/page2': PAGE('Page two', '<h1>two</h1>'),
      '/start': PAGE('Start', '<h1>start</h1>'),
      // A full-width magenta band from the page's very top: whatever the browser puts
      // between its toolbar and the page (an infobar) shows as rows of another colour.
      // The page tells the time it was painted: 16 blocks 40 px square along the top, black for a
      // 1 bit of Date.now() / 32 (65 s before it wraps); black and white survive any colour management.
      '/clock': PAGE('Clock', `<div id="bits" style="position:fixed;top:0;left:0;display:flex"></div><script>
const bits = document.getElementById('bits');
for (let i = 0; i < 16; i++) { const b = document.createElement('div'); b.style.cssText = 'width:40px;height:40px'; bits.appendChild(b); }
(function paint() { const t = Math.floor(Date.now() / 32); for (let i = 0; i < 16; i++) bits.children[i].style.background = (t >> i) & 1 ? '#000' : '#fff'; requestAnimationFrame(paint); })();
</script>`),
      '/band': PAGE('Band', '<div style="position:fixed;top:0;left:0;width:100%;height:240px;background:#ff00ff"></div>'),
    };
    if (path === '/slow') {
      // Answers after 20 s: a navigation that is still in flight when a test kills the browser.
      const t = setTimeout(() => res.writeHead(200, { 'content-type': 'text/html' }).end(PAGE('Slow', 'slow')), 20_000);
      res.once('close', () => clearTimeout(t));
      return;
    }
    const html = pages[path ?? ''];
    res.writeHead(html ? 200 : 404, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(html ?? 'not found');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    altUrl: `http://localhost:${port}`,
    hits,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A forward HTTP proxy (plain requests and CONNECT) that records what passes through. */
export async function startRecordingProxy(): Promise<{ url: string; seen: string[]; close(): Promise<void> }> {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    let target: URL;
    try {
      target = new URL(req.url ?? '');
    } catch {
      res.writeHead(400).end();
      return;
    }
    const up = httpRequest(target, { method: req.method, headers: req.headers }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      ur.pipe(res);
    });
    up.on('error', () => res.writeHead(502).end());
    req.pipe(up);
  });
  server.on('connect', (req, sock) => {
    seen.push(`CONNECT ${req.url}`);
    const [host, port] = (req.url ?? '').split(':');
    const up = connect(Number(port), host ?? '127.0.0.1', () => {
      sock.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      up.pipe(sock);
      sock.pipe(up);
    });
    up.on('error', () => sock.destroy());
    sock.on('error', () => up.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

function statOf(pid: number): { ppid: number; state: string } | undefined {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return { state: rest[0] ?? '', ppid: Number(rest[1]) };
  } catch {
    return undefined;
  }
}

/** Every live descendant of `pid` (not `pid` itself). */
export function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    const p = Number(name);
    if (!Number.isInteger(p)) continue;
    const st = statOf(p);
    if (!st) continue;
    const list = children.get(st.ppid) ?? [];
    list.push(p);
    children.set(st.ppid, list);
  }
  const out: number[] = [];
  const queue = [pid];
  while (queue.length) {
    const cur = queue.shift() as number;
    for (const c of children.get(cur) ?? []) {
      out.push(c);
      queue.push(c);
    }
  }
  return out;
}

export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

/**
 * Pids that still exist. A zombie whose parent is ours counts as left behind (nobody
 * waited for it); one that init adopted has exited after its parent and is init's to
 * reap, whenever init gets to it.
 */
export function stillPresent(pids: number[]): number[] {
  return pids.filter((p) => ((s) => s !== undefined && !(s.state === 'Z' && s.ppid === 1))(statOf(p)));
}

/** Processes anywhere whose command line mentions `needle` (e.g. a test's data dir). */
export function processesMentioning(needle: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    const p = Number(name);
    if (Number.isInteger(p) && p !== process.pid && cmdline(p).includes(needle)) out.push(p);
  }
  return out;
}

/** Uid, seccomp mode and pid-namespace pids of a process, from /proc/<pid>/status. */
export function procStatus(pid: number): { uid: number; seccomp: number; nspid: number[] } | undefined {
  try {
    const st = readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (k: string): string => new RegExp(`^${k}:\\s*(.*)$`, 'm').exec(st)?.[1] ?? '';
    return { uid: Number(field('Uid').split(/\s+/)[1]), seccomp: Number(field('Seccomp')), nspid: field('NSpid').split(/\s+/).filter(Boolean).map(Number) };
  } catch {
    return undefined;
  }
}

/** The browser process and every process it started (zygotes, renderers, GPU, utilities). */
export function browserTree(chromePid: number): number[] {
  return [chromePid, ...descendants(chromePid)];
}

/** `p`, or a rejection naming `what` after `ms`. */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([
    p,
    new Promise<T>((_, reject) => {
      setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms).unref();
    }),
  ]);
}

export async function waitFor<T>(fn: () => Promise<T | undefined> | T | undefined, ms = 10_000, what = 'condition'): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Awaits a plane call that must be refused with `status`; returns the error. */
export async function expectPlaneError(p: Promise<unknown>, status: number): Promise<PlaneCallError> {
  try {
    await p;
  } catch (err) {
    expect(err).to.be.instanceOf(PlaneCallError);
    expect((err as PlaneCallError).status, (err as PlaneCallError).detail).to.equal(status);
    return err as PlaneCallError;
  }
  throw new Error(`expected a ${status} refusal`);
}

/** A page expression's JSON value through the session's cdp call (which must succeed). */
export async function evalJson<T>(s: PlaneSession, expr: string): Promise<T> {
  const r = await s.cdp(expr);
  expect(r.returncode, r.result_json).to.equal(0);
  return JSON.parse(r.result_json) as T;
}

/** What a computer_plane window shows of the page (below the browser's toolbar), as raw pixels. */
export async function pageOnScreen(s: PlaneSession): Promise<Buffer> {
  const shot = await s.screenshot();
  const top = shot.page?.content?.y ?? 100;
  const { width = 0, height = 0 } = await sharp(shot.image).metadata();
  return sharp(shot.image).extract({ left: 0, top, width, height: height - top }).raw().toBuffer();
}

/**
 * computer_plane: loads a URL the way a user would (focus the omnibox, type,
 * Enter), waits for its load, then until the window shows the new page.
 * Chromium drops input that arrives after a navigation but before its first
 * frame is presented, and on this display that can be 30-100 ms after the load
 * event (measured: a click 0 or 30 ms after load was lost 6 times in 6, one
 * 100 ms after it never). The new page must look unlike the one before.
 */
export async function typeUrl(s: PlaneSession, url: string): Promise<void> {
  const shown = await pageOnScreen(s);
  expect((await s.xdotool(['key', 'ctrl+l'])).returncode).to.equal(0);
  expect((await s.xdotool(['type', '--delay', '1', url])).returncode).to.equal(0);
  expect((await s.xdotool(['key', 'Return'])).returncode).to.equal(0);
  await waitFor(async () => ((await evalJson<string>(s, 'location.href')) === url ? true : undefined), 15_000, `navigation to ${url}`);
  await waitFor(async () => ((await evalJson<string>(s, 'document.readyState')) === 'complete' ? true : undefined), 10_000, 'load');
  await waitFor(async () => (!(await pageOnScreen(s)).equals(shown) ? true : undefined), 10_000, `${url} on screen`);
}
