// bench/planes: latency of plane calls over gRPC and the HTTP wire contract on
// loopback, beside the spawn-per-call baseline (one xdotool process per command, one
// ffmpeg per screenshot) in the same run; session init to first screenshot, cold and
// from the warm pool; resident memory (PSS) of an idle session.
//   npm run bench:planes            (BENCH_N scales the sample counts; default 1)
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { connectPlane, type PlaneSession } from '../../gateway/planes/index.ts';
import { startXvfb } from '../../agents/computer/xvfb.ts';
import { builtPath } from '../../shared/build.mjs';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SCALE = Number(process.env.BENCH_N || 1);
type Plane = 'computer' | 'dom';

interface Agent {
  child: ChildProcess;
  http: string;
  grpc: string;
  stop(): Promise<void>;
}

async function startAgent(plane: Plane, env: Record<string, string>): Promise<Agent> {
  const dataDir = mkdtempSync(path.join(tmpdir(), `bench-${plane}-`));
  const child = spawn(process.execPath, [builtPath(path.join(ROOT, `agents/${plane}/main.ts`))], {
    cwd: ROOT,
    env: { ...process.env, PLANE_HTTP_PORT: '0', PLANE_GRPC_PORT: '0', PLANE_DATA_DIR: dataDir, PLANE_ALLOW_PRIVATE_NETWORKS: '1', SERVICE_BEHAVIORAL_JITTER: '0', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = (await new Promise<string[]>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve(out.split('\n'));
    });
    child.once('exit', (c) => reject(new Error(`agent exited ${c}`)));
  })) as [string];
  const info = JSON.parse(line) as { http_port: number; grpc_port: number };
  return {
    child,
    http: `http://127.0.0.1:${info.http_port}`,
    grpc: `grpc://127.0.0.1:${info.grpc_port}`,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
}

async function sample(n: number, fn: (i: number) => Promise<unknown>): Promise<{ p50: number; p99: number; n: number }> {
  for (let i = 0; i < Math.min(5, n); i++) await fn(-1 - i); // warm-up
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await fn(i);
    xs.push(performance.now() - t0);
  }
  return { p50: pct(xs, 50), p99: pct(xs, 99), n };
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const c = spawn(cmd, args, { env, stdio: ['ignore', 'ignore', 'ignore'] });
    c.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} exited ${code}`))));
  });
}

/** Children of `pid`, recursively, read from /proc. */
function tree(pid: number): number[] {
  const parent = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    const p = Number(name);
    if (!Number.isInteger(p)) continue;
    try {
      const s = readFileSync(`/proc/${p}/stat`, 'utf8');
      parent.set(p, Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone
    }
  }
  const out = [pid];
  for (let i = 0; i < out.length; i++) for (const [c, pp] of parent) if (pp === out[i]) out.push(c);
  return out;
}

/** Proportional set size of a process tree in MiB (shared pages split between sharers). */
function pssMiB(pid: number): number {
  let kb = 0;
  for (const p of tree(pid)) {
    try {
      kb += Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${p}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
    } catch {
      // gone
    }
  }
  return kb / 1024;
}

const rows: Record<string, unknown>[] = [];
const row = (plane: string, what: string, transport: string, r: { p50: number; p99: number; n: number }): void => {
  rows.push({ plane, what, transport, p50_ms: +r.p50.toFixed(2), p99_ms: +r.p99.toFixed(2), n: r.n });
};

async function waitPool(s: PlaneSession): Promise<void> {
  for (let i = 0; i < 400 && (await s.status()).pool_ready !== 1; i++) await new Promise((r) => setTimeout(r, 50));
}

async function initToShot(url: string, persist: boolean, i: number): Promise<{ ms: number; initMs: number; warm: boolean }> {
  const s = connectPlane({ url, deadlineMs: 30_000 });
  const t0 = performance.now();
  const r = await s.init({ tenant_id: 'bench', profile_id: `p${i}`, run_id: `init-${persist}-${i}`, persist_profile: persist });
  const initMs = performance.now() - t0;
  await s.screenshot();
  const ms = performance.now() - t0;
  await s.close();
  s.disconnect();
  return { ms, initMs, warm: r.warm === true };
}

async function benchPlane(plane: Plane): Promise<void> {
  const agent = await startAgent(plane, { PLANE_WARM_POOL: '1' });
  try {
    // Session init to first screenshot: cold (persisted profile, so no pooled browser)
    // and from the warm pool (throwaway profile).
    const probe = connectPlane({ url: agent.grpc });
    const cold: number[] = [];
    const warm: number[] = [];
    const warmInit: number[] = [];
    for (let i = 0; i < 3; i++) {
      cold.push((await initToShot(agent.grpc, true, i)).ms);
      await waitPool(probe);
      const w = await initToShot(agent.grpc, false, i);
      if (!w.warm) throw new Error('expected a pooled init');
      warm.push(w.ms);
      warmInit.push(w.initMs);
      await waitPool(probe);
    }
    const beforeMiB = pssMiB(agent.child.pid!);
    rows.push({ plane, what: 'init -> first screenshot, cold', transport: 'grpc', p50_ms: +pct(cold, 50).toFixed(1), p99_ms: +Math.max(...cold).toFixed(1), n: 3 });
    rows.push({ plane, what: 'init alone, warm pool', transport: 'grpc', p50_ms: +pct(warmInit, 50).toFixed(1), p99_ms: +Math.max(...warmInit).toFixed(1), n: 3 });
    rows.push({ plane, what: 'init -> first screenshot, warm pool', transport: 'grpc', p50_ms: +pct(warm, 50).toFixed(1), p99_ms: +Math.max(...warm).toFixed(1), n: 3 });

    const g = connectPlane({ url: agent.grpc, deadlineMs: 30_000 });
    const init = await g.init({ tenant_id: 'bench', profile_id: 'calls', run_id: 'calls', persist_profile: false, enable_cdp: true });
    const h = connectPlane({ url: agent.http, deadlineMs: 30_000 });
    h.attach(init.session_token);
    await waitPool(probe);
    probe.disconnect();
    await new Promise((r) => setTimeout(r, 1500));
    // Before: agent + one warm item. After: agent + the idle session + a refilled warm item.
    const idleMiB = pssMiB(agent.child.pid!) - beforeMiB;

    for (const [name, s] of [['grpc', g], ['http', h]] as const) {
      row(plane, 'no-op (health through the session)', name, await sample(300 * SCALE, () => s.status()));
      if (plane === 'computer') {
        await s.xdotool(['mousemove', '1200', '700']);
        row(plane, 'click (xdotool click --delay 0 1)', name, await sample(200 * SCALE, (i) => s.xdotool(['click', '--delay', '0', '1'], { stepId: `${name}-c-${i}` })));
      } else {
        row(plane, 'click (dispatch click x,y)', name, await sample(200 * SCALE, (i) => s.dispatch({ verb: 'click', x: 1200, y: 700 }, { stepId: `${name}-c-${i}` })));
      }
      row(plane, 'screenshot 1280x720 png', name, await sample(40 * SCALE, () => s.screenshot('png')));
      row(plane, 'screenshot 1280x720 jpeg', name, await sample(40 * SCALE, () => s.screenshot('jpeg')));
      // what a step pays: the screenshot after an input shows a frame captured after it (computer_plane waits for the next grab)
      if (plane === 'computer') row(plane, 'mousemove, then screenshot png', name, await sample(40 * SCALE, async (i) => {
        await s.xdotool(['mousemove', String(1100 + (i % 2) * 50), '700']);
        await s.screenshot('png');
      }));
    }
    if (plane === 'computer') {
      // The baseline: a process per command on a display of its own (the session's display
      // takes only clients with its X cookie, which the agent keeps to itself)
      const own = await startXvfb(1280, 720, undefined);
      try {
        const env = { ...process.env, ...own.env };
        row(plane, 'click, spawn xdotool per call', 'baseline', await sample(50 * SCALE, () => run('xdotool', ['click', '--delay', '0', '1'], env)));
        row(plane, 'screenshot, spawn ffmpeg per call', 'baseline', await sample(10 * SCALE, () =>
          run('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-f', 'x11grab', '-video_size', '1280x720', '-i', `${own.name}.0+0,0`, '-frames:v', '1', '-f', 'image2', '-c:v', 'png', '-y', '/dev/null'], env)));
      } finally {
        await own.stop();
      }
    }
    rows.push({ plane, what: 'idle session PSS (browser, display, grabber, recorder, guard)', transport: '-', p50_ms: null, p99_ms: null, n: 1, mib: +idleMiB.toFixed(0) });
    await g.close();
    g.disconnect();
    h.disconnect();
  } finally {
    await agent.stop();
  }
}

/** The cost of computer_plane's page facts: click and screenshot with them on and off, side by side, on a loaded page. */
async function benchFacts(): Promise<void> {
  const { createServer } = await import('node:http');
  const site = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>bench</title><h1>bench</h1>'));
  site.listen(0, '127.0.0.1');
  await once(site, 'listening');
  const url = `http://127.0.0.1:${(site.address() as { port: number }).port}/`;
  try {
    for (const facts of ['1', '0']) {
      const agent = await startAgent('computer', { PLANE_PAGE_FACTS: facts });
      try {
        const s = connectPlane({ url: agent.grpc, deadlineMs: 30_000 });
        await s.init({ tenant_id: 'bench', profile_id: `facts-${facts}`, run_id: `facts-${facts}` });
        for (const argv of [['key', 'ctrl+l'], ['type', '--delay', '1', url], ['key', 'Return']]) await s.xdotool(argv);
        await new Promise((r) => setTimeout(r, 1500));
        const label = facts === '1' ? 'page facts on' : 'page facts off';
        await s.xdotool(['mousemove', '1200', '700']);
        row('computer', `click (${label})`, 'grpc', await sample(200 * SCALE, (i) => s.xdotool(['click', '--delay', '0', '1'], { stepId: `f${facts}-c-${i}` })));
        row('computer', `screenshot jpeg (${label})`, 'grpc', await sample(40 * SCALE, () => s.screenshot('jpeg')));
        await s.close();
        s.disconnect();
      } finally {
        await agent.stop();
      }
    }
  } finally {
    site.close();
  }
}

// BENCH_PLANES=computer (or dom, or facts) runs one part only.
const parts = (process.env.BENCH_PLANES || 'computer,dom,facts').split(',');
for (const plane of parts.filter((p): p is Plane => p === 'computer' || p === 'dom')) await benchPlane(plane);
if (parts.includes('facts')) await benchFacts();

const header = '| plane | what | transport | p50 ms | p99 ms | n | MiB |';
const lines = [header, '|---|---|---|---|---|---|---|', ...rows.map((r) => `| ${r.plane} | ${r.what} | ${r.transport} | ${r.p50_ms ?? ''} | ${r.p99_ms ?? ''} | ${r.n} | ${r.mib ?? ''} |`)];
process.stdout.write(`${lines.join('\n')}\n`);
mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
writeFileSync(path.join(ROOT, 'bench/results/planes.json'), JSON.stringify({ at: new Date().toISOString(), rows }, null, 2));
