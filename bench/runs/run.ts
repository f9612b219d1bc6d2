// bench/runs: a 20-step mechanical plan on dom_plane, end to end through a real
// gateway with local agents and real Chromium, against a local fixture site,
// side by side with the same plan as a plain puppeteer-core script on the same
// Chromium (bench/runs/plain.ts), in one process:
//  1. single-run wall time: the gateway (warm pool, one run at a time) against
//     the script launching its own browser per run; the script runs twice, as
//     written and taking a PNG after each step (the default capture's extra);
//  2. runs per minute at 1, 2 and 4 concurrent runs: the gateway
//     (SERVICE_MAX_ACTIVE_RUNS=4, SERVICE_PLANE_POOL_SIZE=4) against the script
//     with one shared browser and a fresh context per run;
//  3. per step: through the gateway, straight on an agent session with the same
//     handlers, and in the script;
//  4. plane acquisition from the warm pool, p50/p99, and how long the gateway's
//     event loop was held up at each level (p99 and max);
//  5. --soak N: N sequential runs, memory and open files of the gateway process
//     and of the agents at the start and the end.
// --capture MODE runs the gateway with SERVICE_TRACE_CAPTURE_MODE=MODE (default
// model_io, the service's default): `trace` records no screenshots, which shows
// what a step's post screenshot costs. --ask MODE leaves the gateway at its mode and
// has each run ask for capture_mode MODE in its body, as a caller would.
// PLANE_DOM_BROWSER=headless-shell runs the agents and the plain script on
// chromium-headless-shell.
// --plan form runs the form plan (fill_field, type_text, select_option, submit on
// /order) instead of the click plan; --levels 4 measures only 4 concurrent runs.
// At the highest level each side's CPU-seconds per run are read by kind of process
// (bench/cpu.ts): the node process (the gateway, or the script), the agents,
// Chromium's processes, ffmpeg.
// Usage: [PLANE_DOM_BROWSER=headless-shell] npm run bench:runs [-- --runs 4 --soak 1000 --capture trace --ask trace --plan form --levels 1,2,4]
import { mkdtemp, rm, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { randomUUID } from 'node:crypto';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { loadavg } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { pino } from 'pino';
import { LocalAgentPlanes } from '../../gateway/runner/agent-planes.ts';
import type { RunRecord } from '../../gateway/runs/records.ts';
import { coreHandlers } from './handlers.ts';
import { startSite } from '../../test/support/site.ts';
import { plainRunOwnBrowser, sharedBrowser } from './plain.ts';
import { headlessBrowser } from '../../agents/core/chromium.ts';
import { startBenchGateway } from './gateway.ts';
import { plan, type PlanName } from './plan.ts';
import { numArg, pct, strArg } from '../stats.ts';
import { cpuTable, watchCpu } from '../cpu.ts';

const RUNS_PER_LEVEL = numArg('runs', 4);
const SOAK = numArg('soak', 0);
const CAPTURE = strArg('capture', 'model_io');
const ASK = strArg('ask', '');
const PLAN = strArg('plan', 'click') as PlanName;
if (PLAN !== 'click' && PLAN !== 'form') throw new Error('--plan is click or form');
const LEVELS = strArg('levels', '1,2,4').split(',').map(Number);
const TOP = Math.max(...LEVELS);
/** the node process: the gateway (with the bench's HTTP client), or the plain script */
const NODE = 'node (gateway or script)';
// the last planes close and their recordings finish after the runs' results: their CPU is the run's
const settle = () => new Promise((r) => setTimeout(r, 3000));

const f = (n: number, d = 1) => n.toFixed(d);

const site = await startSite();
const steps = plan(site.url, PLAN);
const dir = await mkdtemp(path.join(tmpdir(), 'runplane-bench-runs-'));
const sink = new Writable({ write: (_c, _e, cb) => cb() });
const load0 = loadavg()[0]!;

// ---- the plain script: own browser per run (wall time), one shared browser (throughput);
// once as written, once with a PNG screenshot after each step (what the default capture adds)
interface Plain {
  wall: number[];
  levels: Map<number, { runsPerMin: number; perRun: number }>;
  cpu: { runs: number; byKind: Map<string, number> };
}
async function measurePlain(shots: boolean): Promise<Plain> {
  await plainRunOwnBrowser(site.url, shots, PLAN); // the first launch reads Chromium from disk
  const wall: number[] = [];
  for (let i = 0; i < RUNS_PER_LEVEL; i++) wall.push(await plainRunOwnBrowser(site.url, shots, PLAN));
  const shared = await sharedBrowser(shots, PLAN);
  await shared.run(site.url);
  const levels = new Map<number, { runsPerMin: number; perRun: number }>();
  let cpu: Plain['cpu'] = { runs: 1, byKind: new Map() };
  for (const c of LEVELS) {
    const times: number[] = [];
    const watch = c === TOP ? await watchCpu(NODE) : undefined;
    const t0 = performance.now();
    await Promise.all(Array.from({ length: c }, async () => {
      for (let i = 0; i < RUNS_PER_LEVEL; i++) times.push(await shared.run(site.url));
    }));
    levels.set(c, { runsPerMin: times.length / ((performance.now() - t0) / 60_000), perRun: pct(times, 50) });
    if (watch) {
      await settle();
      cpu = { runs: times.length, byKind: await watch.stop() };
    }
  }
  await shared.close();
  return { wall, levels, cpu };
}
const plain = await measurePlain(false);
const plainPng = await measurePlain(true);

// ---- the step handlers straight on an agent session, and acquisition from the warm pool
const handlers = await coreHandlers(dir);
const planes = new LocalAgentPlanes(path.join(dir, 'direct'), pino({ level: 'silent' }), { allowPrivateNetworks: true });
const direct: number[] = [];
const acquire: number[] = [];
const fakeRun = () => ({ run_id: randomUUID(), tenant_id: 'bench', profile_id: null, runtime: { compute_backend: 'dom_plane' } }) as unknown as RunRecord;
await (await planes.open(fakeRun())).close(); // the pool's first agent boots
for (let rep = 0; rep < 20; rep++) {
  const run = fakeRun();
  const a0 = performance.now();
  const lease = await planes.open(run);
  acquire.push(performance.now() - a0);
  if (rep < 2) {
    const signal = new AbortController().signal;
    const t0 = performance.now();
    for (const [i, step] of steps.entries()) {
      const r = await handlers.get(step.type)!.run({
        runId: run.run_id,
        tenantId: 'bench',
        step,
        path: `steps[${i}]`,
        plane: lease.plane,
        signal,
        recipe: () => Promise.reject(new Error('no recipes in the bench')),
        callTool: () => Promise.reject(new Error('no tools in the bench')),
        addCost() {},
        log() {},
      });
      if (!r.success) throw new Error(`direct step ${i} (${step.type}) failed: ${r.failure_class} ${r.data ?? ''}`);
    }
    direct.push((performance.now() - t0) / steps.length);
  }
  await lease.close();
}
await planes.close();

// ---- through the gateway
const { gw, url, token } = await startBenchGateway(dir, sink, CAPTURE);

interface RunTiming {
  wallMs: number;
  perStepMs: number;
}
async function oneRun(): Promise<RunTiming> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/predict`, { method: 'POST', headers: { 'X-Service-Token': token, 'Content-Type': 'application/json' }, body: JSON.stringify({ plan: steps, detached: false, ...(ASK ? { capture_mode: ASK } : {}) }) });
  const body = (await res.json()) as { run_id: string; status: string; summary?: string };
  const wallMs = performance.now() - t0;
  if (body.status !== 'succeeded') throw new Error(`run ended ${body.status}: ${body.summary ?? JSON.stringify(body)}`);
  const ev = (await (await fetch(`${url}/v1/runs/${body.run_id}/events`, { headers: { 'X-Service-Token': token } })).json()) as { events: Array<{ type: string; ts: string }> };
  const started = ev.events.find((e) => e.type === 'step.started')!;
  const finished = ev.events.filter((e) => e.type === 'step.finished').at(-1)!;
  return { wallMs, perStepMs: (Date.parse(finished.ts) - Date.parse(started.ts)) / steps.length };
}

// warm the pool up to four agents
await Promise.all(Array.from({ length: 4 }, () => oneRun()));
const gwWall: RunTiming[] = [];
for (let i = 0; i < RUNS_PER_LEVEL; i++) gwWall.push(await oneRun());
const levels: Array<{ c: number; runsPerMin: number; p50: number; p99: number; perStep: number; loop: IntervalHistogram }> = [];
let gwCpu: Plain['cpu'] = { runs: 1, byKind: new Map() };
for (const c of LEVELS) {
  const timings: RunTiming[] = [];
  const watch = c === TOP ? await watchCpu(NODE) : undefined;
  // how long the gateway's event loop (this process) was held up: every run and request waits behind it
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: c }, async () => {
      for (let i = 0; i < RUNS_PER_LEVEL; i++) timings.push(await oneRun());
    }),
  );
  const minutes = (performance.now() - t0) / 60_000;
  loop.disable();
  if (watch) {
    await settle();
    gwCpu = { runs: timings.length, byKind: await watch.stop() };
  }
  const walls = timings.map((t) => t.wallMs);
  levels.push({ c, runsPerMin: timings.length / minutes, p50: pct(walls, 50), p99: pct(walls, 99), perStep: pct(timings.map((t) => t.perStepMs), 50), loop });
}

// ---- soak: memory and open files, start and end
interface Usage {
  gwRssMb: number;
  /** the gateway's live heap after a full collection: what a leak grows (RSS also moves with the allocator) */
  gwHeapMb: number;
  gwFds: number;
  agents: number;
  agentRssMb: number;
  agentFds: number;
  /** what the agents started (Chromium, ffmpeg): process count and proportional set size */
  children: number;
  childPssMb: number;
}
/** The heap in use after a full collection (gc exposed at run time: the bench needs no node flag). */
function liveHeapMb(): number {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
  return process.memoryUsage().heapUsed / 1024 / 1024;
}
async function usage(): Promise<Usage> {
  const rss = async (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8').catch(() => ''))?.[1] ?? 0) / 1024;
  const fds = async (pid: number) => (await readdir(`/proc/${pid}/fd`).catch(() => [])).length;
  const agents: number[] = [];
  for (const p of await readdir('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    const cmd = await readFile(`/proc/${p}/cmdline`, 'utf8').catch(() => '');
    const ppid = Number(/PPid:\s+(\d+)/.exec(await readFile(`/proc/${p}/status`, 'utf8').catch(() => ''))?.[1]);
    if (ppid === process.pid && /agents\/(dom|computer)\/main\.ts/.test(cmd)) agents.push(Number(p));
  }
  let agentRss = 0;
  let agentFds = 0;
  for (const a of agents) {
    agentRss += await rss(a);
    agentFds += await fds(a);
  }
  const pss = async (pid: number) => Number(/Pss:\s+(\d+)/.exec(await readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => ''))?.[1] ?? 0) / 1024;
  const below: number[] = [];
  const todo = [...agents];
  while (todo.length > 0) {
    const pid = todo.pop()!;
    for (const tid of await readdir(`/proc/${pid}/task`).catch(() => [] as string[])) {
      const kids = (await readFile(`/proc/${pid}/task/${tid}/children`, 'utf8').catch(() => '')).split(' ').filter(Boolean).map(Number);
      below.push(...kids);
      todo.push(...kids);
    }
  }
  let childPss = 0;
  for (const k of below) childPss += await pss(k);
  return { gwRssMb: await rss(process.pid), gwHeapMb: liveHeapMb(), gwFds: await fds(process.pid), agents: agents.length, agentRssMb: agentRss, agentFds, children: below.length, childPssMb: childPss };
}
function usageLine(x: Usage): string {
  return `gateway process ${f(x.gwRssMb)} MB RSS, ${f(x.gwHeapMb)} MB heap after a full GC, ${x.gwFds} fds; ${x.agents} agents ${f(x.agentRssMb)} MB RSS, ${x.agentFds} fds; their ${x.children} browser and recorder processes ${f(x.childPssMb)} MB PSS`;
}
let soak: { start: Usage; end: Usage; wall: number[] } | undefined;
if (SOAK > 0) {
  const start = await usage();
  const wall: number[] = [];
  for (let i = 0; i < SOAK; i++) {
    wall.push((await oneRun()).wallMs);
    // a line every fifth of the soak, so a slope shows (and a long soak shows it is alive)
    if ((i + 1) % Math.max(1, Math.round(SOAK / 5)) === 0 && i + 1 < SOAK) console.error(`soak: ${i + 1} runs, ${usageLine(await usage())}`);
  }
  await new Promise((r) => setTimeout(r, 3000)); // the last planes finish closing
  soak = { start, end: await usage(), wall };
}
await gw.close();
await site.close();
await rm(dir, { recursive: true, force: true });

const r = (a: number, b: number) => f(a / b, 2);
const gwWallP50 = pct(gwWall.map((t) => t.wallMs), 50);
const gwPerStep = pct(gwWall.map((t) => t.perStepMs), 50);
const perStep = (p: Plain) => p.levels.get(Math.min(...LEVELS))!.perRun / steps.length;
const directPerStep = Math.min(...direct);
console.log(`bench/runs: ${steps.length}-step mechanical ${PLAN} plan on dom_plane (browser ${headlessBrowser()}), trace capture ${CAPTURE}${ASK ? ` (each run asks for ${ASK})` : ''}, ${RUNS_PER_LEVEL} runs per client, node ${process.version}, load average ${f(load0, 2)} at the start, ${f(loadavg()[0]!, 2)} at the end`);
console.log('plain: the script as written; +png: the same script taking a PNG screenshot after each step, as the default capture does');
console.log('');
const row = (label: string, a: number, b: number, g: number, d: number, note: string) =>
  console.log(`${label.padEnd(35)}| ${f(a, d).padStart(6)} | ${f(b, d).padStart(6)} | ${f(g, d).padStart(7)} | ${r(g, a).padStart(11)} | ${r(g, b).padStart(10)}   ${note}`);
console.log('                                   |  plain |   +png | gateway |  gw / plain |  gw / +png');
row('single run wall ms (p50)', pct(plain.wall, 50), pct(plainPng.wall, 50), gwWallP50, 0, '(script launches its browser per run; gateway from its warm pool)');
for (const l of levels) {
  row(`runs/min at ${l.c} concurrent`, plain.levels.get(l.c)!.runsPerMin, plainPng.levels.get(l.c)!.runsPerMin, l.runsPerMin, 1, `(script: one browser, a context per run; gateway run p50 ${f(l.p50, 0)} ms, p99 ${f(l.p99, 0)} ms)`);
}
row(`per step ms (p50, script at ${Math.min(...LEVELS)} conc.)`, perStep(plain), perStep(plainPng), gwPerStep, 1, `(straight on an agent session, same handlers: ${f(directPerStep)} ms)`);
console.log(`plane acquisition from the warm pool: p50 ${f(pct(acquire, 50))} ms, p99 ${f(pct(acquire, 99))} ms (${acquire.length} opens)`);
const ms = (ns: number) => f(ns / 1e6);
console.log(`gateway event loop delay at ${LEVELS.join(' / ')} concurrent: p99 ${levels.map((l) => ms(l.loop.percentile(99))).join(' / ')} ms, max ${levels.map((l) => ms(l.loop.max)).join(' / ')} ms`);
console.log('');
for (const line of cpuTable([{ name: 'plain', ...plain.cpu }, { name: '+png', ...plainPng.cpu }, { name: 'gateway', ...gwCpu }])) console.log(line);
console.log(`(at ${TOP} concurrent, ${gwCpu.runs} runs a side; renderers and ffmpeg that exited are billed whole through their parents' reaped time)`);
if (soak) {
  const u = usageLine;
  console.log(`soak of ${SOAK} sequential runs (wall p50 ${f(pct(soak.wall, 50), 0)} ms, p99 ${f(pct(soak.wall, 99), 0)} ms):`);
  console.log(`  start: ${u(soak.start)}`);
  console.log(`  end:   ${u(soak.end)}`);
}
process.exit(0);
