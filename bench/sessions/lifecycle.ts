// Browser sessions through the gateway, the way BrowserArena measures hosted browsers:
// create (POST /v1/sessions) + CDP connect (puppeteer-core through the gateway) + load a
// local page + release (DELETE), on each plane, two ways: from a warm pool (before each
// timed session the bench waits until the plane's agents are idle with their warm
// browsers ready, and reports that wait apart) and back to back (each session right after
// the last one's release: a CDP session retires its browser, so the next may wait for the
// replacement's launch); then 20 at once on this one host. Beside it, the CDP round trip of
// Runtime.evaluate('1') through the gateway against a ws straight to the same browser's
// debugging port, alternating rounds. Prints p50/p99 in ms and the load average.
// --depth N sets PLANE_WARM_DEPTH (warm browsers per agent) for the gateway's local agents.
// Usage: npm run bench:sessions -- [--n 20] [--concurrent 20] [--rtt 300] [--depth 0]
import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import puppeteer, { type CDPSession } from 'puppeteer-core';
import { startGateway, newToken, type TestGateway } from '../../test/support/gateway.ts';
import { startSite } from '../../test/support/site.ts';
import { probePlane } from '../../gateway/planes/index.ts';
import { numArg, pct } from '../stats.ts';

const N = numArg('n', 20);
const CONCURRENT = numArg('concurrent', 20);
const RTT = numArg('rtt', 300);
const DEPTH = numArg('depth', Number(process.env.PLANE_WARM_DEPTH || 0));
// the gateway's local agents inherit this process's environment
if (DEPTH > 0) process.env.PLANE_WARM_DEPTH = String(DEPTH);
const token = newToken();
const headers = { 'X-Service-Token': token };

const fmt = (xs: number[]): string => `p50 ${pct(xs, 50).toFixed(0).padStart(5)} ms  p99 ${pct(xs, 99).toFixed(0).padStart(5)} ms`;

/** One session's whole life; the seconds of each part. */
async function lifecycle(gw: TestGateway, plane: string, page: string): Promise<{ total: number; create: number; connect: number; load: number; release: number }> {
  const t0 = performance.now();
  const made = await gw.req('POST', '/v1/sessions', { token, body: { compute_backend: plane } });
  if (made.status !== 200) throw new Error(`create: ${made.status} ${made.text}`);
  const t1 = performance.now();
  const browser = await puppeteer.connect({ browserWSEndpoint: made.body.cdp_url as string, headers, defaultViewport: null });
  const tab = (await browser.pages())[0] ?? (await browser.newPage());
  const t2 = performance.now();
  await tab.goto(page);
  const t3 = performance.now();
  await browser.disconnect();
  await gw.req('DELETE', `/v1/sessions/${made.body.session_id}`, { token });
  const t4 = performance.now();
  return { total: t4 - t0, create: t1 - t0, connect: t2 - t1, load: t3 - t2, release: t4 - t3 };
}

interface AgentView {
  backend: string;
  url: string;
  secret: string;
  child: { pid?: number };
}

/** PSS (kB) of every Chromium process under the plane's agents, and how many browsers (main processes) that is. */
function browserMemory(gw: TestGateway, plane: string): { browsers: number; mb: number } {
  const parent = new Map<number, number>();
  for (const d of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const st = readFileSync(`/proc/${d}/stat`, 'utf8');
      parent.set(Number(d), Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  const roots = new Set(agentsOf(gw).filter((a) => a.backend === plane).map((a) => a.child.pid));
  const under = (pid: number): boolean => {
    for (let p = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) if (roots.has(p)) return true;
    return false;
  };
  let kb = 0;
  let browsers = 0;
  for (const pid of parent.keys()) {
    if (!under(pid)) continue;
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (!/chrom/.test(argv[0] ?? '')) continue;
      if (!argv.some((a) => a.startsWith('--type=')) && argv.some((a) => a.startsWith('--remote-debugging-port'))) browsers += 1;
      kb += Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
    } catch {
      // gone meanwhile
    }
  }
  return { browsers, mb: kb / 1024 };
}

/** The gateway's local agents (read from inside the in-process gateway: a bench's view, no API has it). */
function agentsOf(gw: TestGateway): AgentView[] {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const pool = (gw.gateway.services.sessions as any).d.planes.pool as { all: Set<AgentView>; stats(): { starting: number } };
  return [...pool.all];
}

/** Waits until every agent of `plane` is idle with its warm pool full; the ms waited (capped at 30 s). */
async function warmed(gw: TestGateway, plane: string): Promise<number> {
  const t = performance.now();
  while (performance.now() - t < 30_000) {
    const agents = agentsOf(gw).filter((a) => a.backend === plane);
    const health = await Promise.all(agents.map((a) => probePlane({ url: a.url, secret: a.secret }, 2000).catch(() => undefined)));
    if (agents.length > 0 && health.every((h) => h && h.ok !== false && !h.session_bound && (h.pool_ready ?? 0) >= (h.pool_capacity ?? 0))) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return performance.now() - t;
}

/** The browser's own debugging endpoint, from its command line and DevToolsActivePort (the agent's host is this one). */
function directEndpoint(chromePid: number): string {
  const argv = readFileSync(`/proc/${chromePid}/cmdline`, 'utf8').split('\0');
  const dir = argv.find((a) => a.startsWith('--user-data-dir='))!.slice('--user-data-dir='.length);
  const [port, path] = readFileSync(`${dir}/DevToolsActivePort`, 'utf8').trim().split('\n');
  return `ws://127.0.0.1:${port}${path}`;
}

async function rtt(gw: TestGateway, page: string): Promise<void> {
  const made = await gw.req('POST', '/v1/sessions', { token, body: { compute_backend: 'dom_plane', keep_alive: true } });
  const id = made.body.session_id as string;
  const opened = gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((o) => o.msg === 'plane session opened' && o.run_id === id);
  const viaGateway = await puppeteer.connect({ browserWSEndpoint: made.body.cdp_url as string, headers });
  const direct = await puppeteer.connect({ browserWSEndpoint: directEndpoint(opened!.chrome_pid as number) });
  const tab = await viaGateway.newPage();
  await tab.goto(page);
  const sessions: Record<string, CDPSession> = {
    gateway: await tab.createCDPSession(),
    direct: await (await direct.pages()).find((p) => p.url() === page)!.createCDPSession(),
  };
  const times: Record<string, number[]> = { gateway: [], direct: [] };
  for (let round = 0; round < 6; round++) {
    for (const via of round % 2 ? ['direct', 'gateway'] : ['gateway', 'direct']) {
      for (let i = 0; i < RTT / 6; i++) {
        const t = performance.now();
        await sessions[via]!.send('Runtime.evaluate', { expression: '1' });
        times[via]!.push(performance.now() - t);
      }
    }
  }
  const p50 = (via: string): number => pct(times[via]!, 50);
  process.stdout.write(`Runtime.evaluate('1') round trip, ${times.gateway!.length} each:\n`);
  process.stdout.write(`  through the gateway  p50 ${p50('gateway').toFixed(2)} ms  p99 ${pct(times.gateway!, 99).toFixed(2)} ms\n`);
  process.stdout.write(`  direct to the browser p50 ${p50('direct').toFixed(2)} ms  p99 ${pct(times.direct!, 99).toFixed(2)} ms\n`);
  process.stdout.write(`  ratio (p50) ${(p50('gateway') / p50('direct')).toFixed(2)}x\n`);
  await direct.disconnect();
  await viaGateway.disconnect();
  await gw.req('DELETE', `/v1/sessions/${id}`, { token });
}

async function main(): Promise<void> {
  const site = await startSite();
  const gw = await startGateway({
    env: { SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1', SERVICE_PLANE_SPARE: '1', SERVICE_PLANE_POOL_SIZE: '4', SERVICE_LOG_LEVEL: 'info' },
    keys: { [token]: { tenant_id: 'bench', rate_limit_per_minute: 0, max_concurrent_runs: CONCURRENT + 2 } },
  });
  const page = `${site.url}/list?page=1`;
  try {
    process.stdout.write(`sessions bench: load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}, ${N} sessions per plane from a warm pool and ${N} back to back, ${CONCURRENT} at once, PLANE_WARM_DEPTH ${DEPTH || 'unset (1)'}\n`);
    for (const plane of ['dom_plane', 'computer_plane']) {
      await lifecycle(gw, plane, page); // the first starts the plane's agent: not counted
      const report = (how: string, runs: Array<Awaited<ReturnType<typeof lifecycle>>>, extra = ''): void => {
        const col = (k: keyof (typeof runs)[number]) => runs.map((r) => r[k]);
        process.stdout.write(`${plane} ${how}: create+connect+load+release ${fmt(col('total'))}  (create p50 ${pct(col('create'), 50).toFixed(0)}, connect ${pct(col('connect'), 50).toFixed(0)}, load ${pct(col('load'), 50).toFixed(0)}, release ${pct(col('release'), 50).toFixed(0)} ms)${extra}\n`);
      };
      const warm: Array<Awaited<ReturnType<typeof lifecycle>>> = [];
      const waits: number[] = [];
      for (let i = 0; i < N; i++) {
        waits.push(await warmed(gw, plane));
        warm.push(await lifecycle(gw, plane, page));
      }
      report('from a warm pool', warm, `; waited for the pool before each: p50 ${pct(waits, 50).toFixed(0)} ms, max ${Math.max(...waits).toFixed(0)} ms`);
      await warmed(gw, plane);
      const mem = browserMemory(gw, plane);
      process.stdout.write(`${plane} idle: ${agentsOf(gw).filter((a) => a.backend === plane).length} agents, ${mem.browsers} warm browsers, Chromium PSS ${mem.mb.toFixed(0)} MB (${(mem.mb / Math.max(1, mem.browsers)).toFixed(0)} MB a browser)\n`);
      const b2b: Array<Awaited<ReturnType<typeof lifecycle>>> = [];
      for (let i = 0; i < N; i++) b2b.push(await lifecycle(gw, plane, page));
      report('back to back', b2b);
    }
    const t = performance.now();
    const many = await Promise.all(Array.from({ length: CONCURRENT }, () => lifecycle(gw, 'dom_plane', page)));
    process.stdout.write(`dom_plane, ${CONCURRENT} at once: ${fmt(many.map((r) => r.total))}, all in ${((performance.now() - t) / 1000).toFixed(1)} s\n`);
    const opened = gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((o) => o.msg === 'plane session opened');
    process.stdout.write(`plane sessions opened: ${opened.length}, from a warm browser ${opened.filter((o) => o.warm === true).length}, init p50 ${pct(opened.map((o) => Number(o.init_ms)), 50)} ms\n`);
    await rtt(gw, page);
    process.stdout.write(`load average after: ${loadavg().map((l) => l.toFixed(1)).join(' ')}\n`);
  } finally {
    await gw.close();
    await site.close();
  }
}

await main();
