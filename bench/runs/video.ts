// bench/runs/video: what dom_plane's session video costs per run, apart from the rest,
// and what pacing its screencast saves. The bench's plan (--plan form by default) runs
// straight on agent sessions with the step handlers (no gateway: the video is paid in
// the agent, Chromium and ffmpeg), a PNG screenshot after each step as the default
// capture takes, at 4 concurrent, on three pools of local agents started with
//   none:  PLANE_RECORD=0 (no video)
//   every: PLANE_RECORD_PACED=0 (a screencast frame for every repaint, as before)
//   paced: the default (the screencast paced to PLANE_RECORD_FPS)
// Rounds alternate none, every, paced (--rounds N of each), so the load from other work
// falls on all three alike; CPU-seconds per run by kind of process (bench/cpu.ts) and
// runs/min are summed over a variant's rounds. The idle pools' processes are in every
// round's figures alike.
// Usage: npm run bench:video [-- --rounds 3 --runs 2 --plan form|click --concurrent 4]
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { LocalAgentPlanes } from '../../gateway/runner/agent-planes.ts';
import type { RunRecord } from '../../gateway/runs/records.ts';
import { coreHandlers } from './handlers.ts';
import { startSite } from '../../test/support/site.ts';
import { plan, type PlanName } from './plan.ts';
import { numArg, strArg } from '../stats.ts';
import { cpuTable, watchCpu } from '../cpu.ts';

const ROUNDS = numArg('rounds', 3);
const RUNS = numArg('runs', 2);
const CONCURRENT = numArg('concurrent', 4);
const PLAN = strArg('plan', 'form') as PlanName;
const VARIANTS = { none: { PLANE_RECORD: '0' }, every: { PLANE_RECORD: '1', PLANE_RECORD_PACED: '0' }, paced: { PLANE_RECORD: '1', PLANE_RECORD_PACED: '1' } } as const;
type Variant = keyof typeof VARIANTS;
const f = (n: number, d = 1) => n.toFixed(d);
// the last sessions' recordings finish after their close: their CPU is the round's
const settle = () => new Promise((r) => setTimeout(r, 3000));

const site = await startSite();
const steps = plan(site.url, PLAN);
const dir = await mkdtemp(path.join(tmpdir(), 'runplane-bench-video-'));
const handlers = await coreHandlers(dir);

const fakeRun = () => ({ run_id: randomUUID(), tenant_id: 'bench', profile_id: null, runtime: { compute_backend: 'dom_plane' } }) as unknown as RunRecord;
async function oneRun(planes: LocalAgentPlanes): Promise<void> {
  const run = fakeRun();
  const lease = await planes.open(run);
  try {
    const signal = new AbortController().signal;
    for (const [i, step] of steps.entries()) {
      const r = await handlers.get(step.type)!.run({ runId: run.run_id, tenantId: 'bench', step, path: `steps[${i}]`, plane: lease.plane, signal, recipe: () => Promise.reject(new Error('no recipes')), callTool: () => Promise.reject(new Error('no tools')), addCost() {}, log() {} });
      if (!r.success) throw new Error(`step ${i} (${step.type}) failed: ${r.failure_class} ${r.data ?? ''}`);
      await lease.plane.screenshot('png');
    }
  } finally {
    await lease.close();
  }
}
const level = (planes: LocalAgentPlanes) => Promise.all(Array.from({ length: CONCURRENT }, async () => {
  for (let i = 0; i < RUNS; i++) await oneRun(planes);
}));

// a pool per variant, its agents started with the variant's environment (they read it per session)
const saved = { ...process.env };
const useEnv = (v: Variant) => {
  for (const k of ['PLANE_RECORD', 'PLANE_RECORD_PACED']) delete process.env[k];
  Object.assign(process.env, saved, VARIANTS[v]);
};
const pools = new Map<Variant, LocalAgentPlanes>();
for (const v of Object.keys(VARIANTS) as Variant[]) {
  useEnv(v);
  const planes = new LocalAgentPlanes(path.join(dir, v), pino({ level: 'silent' }), { allowPrivateNetworks: true, poolSize: CONCURRENT, recycleAfter: 10_000, spare: false });
  await Promise.all(Array.from({ length: CONCURRENT }, () => oneRun(planes)));
  pools.set(v, planes);
}

const load0 = loadavg()[0]!;
const total = new Map<Variant, { runs: number; minutes: number; byKind: Map<string, number> }>();
for (let round = 0; round < ROUNDS; round++) {
  for (const [v, planes] of pools) {
    useEnv(v);
    const watch = await watchCpu('bench (node)');
    const t0 = performance.now();
    await level(planes);
    const minutes = (performance.now() - t0) / 60_000;
    await settle();
    const byKind = await watch.stop();
    const t = total.get(v) ?? { runs: 0, minutes: 0, byKind: new Map<string, number>() };
    t.runs += CONCURRENT * RUNS;
    t.minutes += minutes;
    for (const [k, s] of byKind) t.byKind.set(k, (t.byKind.get(k) ?? 0) + s);
    total.set(v, t);
    console.error(`round ${round + 1} ${v}: ${f((CONCURRENT * RUNS) / minutes)} runs/min, load ${f(loadavg()[0]!, 2)}`);
  }
}
for (const planes of pools.values()) await planes.close();
await site.close();
await rm(dir, { recursive: true, force: true });

console.log(`bench/runs/video: ${steps.length}-step ${PLAN} plan straight on dom_plane agent sessions, a PNG after each step, ${CONCURRENT} concurrent, ${ROUNDS} alternated rounds of ${CONCURRENT * RUNS} runs per variant, load ${f(load0, 2)} at the start, ${f(loadavg()[0]!, 2)} at the end`);
console.log(`runs/min: ${[...total].map(([v, t]) => `${v} ${f(t.runs / t.minutes)}`).join(', ')}`);
for (const line of cpuTable([...total].map(([name, t]) => ({ name, runs: t.runs, byKind: t.byKind })))) console.log(line);
process.exit(0);
