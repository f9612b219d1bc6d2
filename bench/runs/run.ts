// bench/runs: a 20-step mechanical plan on dom_plane, end to end through a real
// gateway with local agents and real Chromium, against a local fixture site.
//  1. runs per minute at 1, 2 and 4 concurrent runs (SERVICE_MAX_ACTIVE_RUNS=4);
//  2. gateway overhead per step: the same 20 steps run by the same step handlers
//     straight on an agent session (no HTTP, no run records, no events), beside
//     the per-step time of a run through the gateway.
// Usage: npm run bench:runs [-- --runs 4]
import { mkdtemp, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { loadConfig } from '../../gateway/config.ts';
import { createGateway } from '../../gateway/server.ts';
import { LocalAgentPlanes } from '../../gateway/runner/agent-planes.ts';
import type { RunRecord } from '../../gateway/runs/records.ts';
import type { PluginHost, Step, StepHandler } from '../../gateway/plugins/contract.ts';
import stepsCore from '../../plugins/steps-core/index.ts';
import { startSite } from '../../test/support/site.ts';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const RUNS_PER_LEVEL = arg('runs', 4);

function plan(site: string): Step[] {
  const extract = { intent: 'read the cards', type: 'extract_data', extract: { schema_name: 'flats', item_selector: '.card', fields: [{ name: 'title', type: 'str', selector: 'h2', required: true }, { name: 'price', type: 'float', selector: '.price' }] } };
  const next = { intent: 'next page', type: 'paginate' };
  const steps: Step[] = [
    { intent: 'open the listings', type: 'navigate', url: `${site}/list?page=1` },
    extract,
    next,
    extract,
    next,
    extract,
    { intent: 'open the counter', type: 'navigate', url: `${site}/counter` },
  ] as Step[];
  for (let i = 0; i < 12; i++) steps.push({ intent: `hit ${i + 1}`, type: 'click', params: { selector: '#hit' } } as Step);
  steps.push({ intent: 'where are we', type: 'extract_url' } as Step);
  return steps;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};
const f = (n: number, d = 1) => n.toFixed(d);

const site = await startSite();
const steps = plan(site.url);
const dir = await mkdtemp(path.join(tmpdir(), 'runplane-bench-runs-'));
const sink = new Writable({ write: (_c, _e, cb) => cb() });

// ---- baseline: the step handlers straight on an agent session
const handlers = new Map<string, StepHandler>();
const host: PluginHost = {
  apiVersion: stepsCore.apiVersion,
  log: { info() {}, warn() {}, error() {} },
  dataDir: path.join(dir, 'plugins', stepsCore.name),
  stepHandler: (h) => h.types.forEach((t) => handlers.set(t, h)),
  brain() {},
  recipe() {},
  hostTool() {},
  traceSink() {},
  routes() {},
};
await stepsCore.register(host);
const planes = new LocalAgentPlanes(path.join(dir, 'direct'), pino({ level: 'silent' }), { allowPrivateNetworks: true });
const direct: number[] = [];
for (let rep = 0; rep < 2; rep++) {
  const run = { run_id: randomUUID(), tenant_id: 'bench', profile_id: null, runtime: { compute_backend: 'dom_plane' } } as unknown as RunRecord;
  const lease = await planes.open(run);
  const signal = new AbortController().signal;
  const t0 = performance.now();
  for (const [i, step] of steps.entries()) {
    const h = handlers.get(step.type)!;
    const r = await h.run({
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
  await lease.close();
}
await planes.close();

// ---- through the gateway
const token = 'r'.repeat(64);
const keys = path.join(dir, 'keys.json');
await writeFile(keys, JSON.stringify({ tenant_keys: { [token]: { tenant_id: 'bench', rate_limit_per_minute: 0, max_concurrent_runs: 100, default_compute_backend: 'dom_plane' } } }));
async function startGw(traceMode: string) {
  const config = loadConfig({ SERVICE_PORT: '0', SERVICE_DATA_DIR: path.join(dir, `gw-${traceMode}`), SERVICE_TENANT_KEYS_PATH: keys, SERVICE_RUNNER: 'on', SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1', SERVICE_MAX_ACTIVE_RUNS: '4', SERVICE_TRACE_CAPTURE_MODE: traceMode });
  const gw = await createGateway(config, { logStream: sink });
  return { gw, url: await gw.listen() };
}

interface RunTiming {
  wallMs: number;
  perStepMs: number;
}
async function oneRun(url: string): Promise<RunTiming> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/predict`, { method: 'POST', headers: { 'X-Service-Token': token, 'Content-Type': 'application/json' }, body: JSON.stringify({ plan: steps, detached: false }) });
  const body = (await res.json()) as { run_id: string; status: string; summary?: string };
  const wallMs = performance.now() - t0;
  if (body.status !== 'succeeded') throw new Error(`run ended ${body.status}: ${body.summary ?? JSON.stringify(body)}`);
  const ev = (await (await fetch(`${url}/v1/runs/${body.run_id}/events`, { headers: { 'X-Service-Token': token } })).json()) as { events: Array<{ type: string; ts: string }> };
  const started = ev.events.find((e) => e.type === 'step.started')!;
  const finished = ev.events.filter((e) => e.type === 'step.finished').at(-1)!;
  return { wallMs, perStepMs: (Date.parse(finished.ts) - Date.parse(started.ts)) / steps.length };
}

// per step at one run at a time, with the trace recording without screenshots ('trace') and with them (the default)
const perStepByMode = new Map<string, number>();
for (const mode of ['trace', 'screenshots']) {
  const { gw, url } = await startGw(mode);
  await oneRun(url); // warm: spares started
  const xs: number[] = [];
  for (let i = 0; i < RUNS_PER_LEVEL; i++) xs.push((await oneRun(url)).perStepMs);
  perStepByMode.set(mode, pct(xs, 50));
  await gw.close();
}

const { gw, url } = await startGw('screenshots');
await oneRun(url);
const levels: Array<{ c: number; runsPerMin: number; p50: number; p99: number; perStep: number }> = [];
for (const c of [1, 2, 4]) {
  const timings: RunTiming[] = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: c }, async () => {
      for (let i = 0; i < RUNS_PER_LEVEL; i++) timings.push(await oneRun(url));
    }),
  );
  const minutes = (performance.now() - t0) / 60_000;
  const walls = timings.map((t) => t.wallMs);
  levels.push({ c, runsPerMin: timings.length / minutes, p50: pct(walls, 50), p99: pct(walls, 99), perStep: pct(timings.map((t) => t.perStepMs), 50) });
}
await gw.close();
await site.close();
await rm(dir, { recursive: true, force: true });

const directPerStep = Math.min(...direct);
console.log(`bench/runs: ${steps.length}-step mechanical plan on dom_plane, ${RUNS_PER_LEVEL} runs per client, node ${process.version}`);
console.log('');
console.log('concurrent | runs/min | run p50 ms | run p99 ms | per step ms (p50)');
for (const l of levels) console.log(`${String(l.c).padStart(10)} | ${f(l.runsPerMin).padStart(8)} | ${f(l.p50, 0).padStart(10)} | ${f(l.p99, 0).padStart(10)} | ${f(l.perStep).padStart(8)}`);
console.log('');
console.log('per step, one run at a time               | ms    | overhead vs the agent');
console.log(`straight to the agent (same handlers)    | ${f(directPerStep).padStart(5)} |`);
for (const [mode, ms] of perStepByMode) {
  console.log(`gateway, SERVICE_TRACE_CAPTURE_MODE=${mode.padEnd(11)} | ${f(ms).padStart(5)} | ${f(ms - directPerStep)} ms (${f(((ms - directPerStep) / directPerStep) * 100)} %)`);
}
process.exit(0);
