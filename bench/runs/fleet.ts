// bench/runs fleet row (issue 18): the 20-step plan on a fleet of registered
// dom_plane agents (real agent processes announcing themselves to one gateway on
// SQLite, real Chromium), with 1, 2 and 4 agents: runs per minute of a batch of
// runs submitted at once, and placement latency (run accepted to session bound,
// from the run's own events) of runs submitted one at a time with the pool warm.
// The agents share this machine's cores: read the scaling ratio, not the speed.
// Usage: npm run bench:fleet [-- --batch 8 --single 10]
import { mkdtemp, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig } from '../../gateway/config.ts';
import { createGateway } from '../../gateway/server.ts';
import { startSite } from '../../test/support/site.ts';
import { startAgentProcess, type AgentProc } from '../../test/planes/support.ts';
import { plan } from './plan.ts';
import { numArg, pct } from '../stats.ts';

const BATCH = numArg('batch', 8);
const SINGLE = numArg('single', 10);
const SECRET = 'bench-fleet-secret-0123456789abcdef';
const f = (n: number, d = 1) => n.toFixed(d);

const site = await startSite();
const steps = plan(site.url);
const dir = await mkdtemp(path.join(tmpdir(), 'runplane-bench-fleet-'));
const token = 'f'.repeat(64);
const operator = 'o'.repeat(64);
await writeFile(path.join(dir, 'keys.json'), JSON.stringify({ tenant_keys: { [token]: { tenant_id: 'bench', rate_limit_per_minute: 0, max_concurrent_runs: 100, default_compute_backend: 'dom_plane' }, [operator]: { tenant_id: 'ops', scopes: ['operator'] } } }));
const config = loadConfig({
  SERVICE_PORT: '0',
  SERVICE_DATA_DIR: path.join(dir, 'gw'),
  SERVICE_TENANT_KEYS_PATH: path.join(dir, 'keys.json'),
  SERVICE_RUNNER: 'on',
  SERVICE_PLANES: 'fleet',
  SERVICE_PLANE_SECRET: SECRET,
  SERVICE_ALLOW_PRIVATE_NETWORKS: '1',
  SERVICE_MAX_ACTIVE_RUNS: String(BATCH),
});
const gw = await createGateway(config, { logStream: new Writable({ write: (_c, _e, cb) => cb() }) });
const url = await gw.listen();
const headers = { 'X-Service-Token': token, 'Content-Type': 'application/json' };
const load0 = loadavg()[0]!;

async function submit(): Promise<string> {
  const r = await fetch(`${url}/v1/predict`, { method: 'POST', headers, body: JSON.stringify({ plan: steps, detached: true }) });
  return ((await r.json()) as { run_id: string }).run_id;
}
async function ended(id: string): Promise<{ placeMs: number }> {
  for (;;) {
    const life = (await (await fetch(`${url}/v1/runs/${id}`, { headers })).json()) as { status: string; summary?: string; created_at: string };
    if (['succeeded', 'failed', 'cancelled'].includes(life.status)) {
      if (life.status !== 'succeeded') throw new Error(`run ${id} ended ${life.status}: ${life.summary}`);
      const ev = (await (await fetch(`${url}/v1/runs/${id}/events`, { headers })).json()) as { events: Array<{ type: string; ts: string; data: { status?: string } }> };
      const bound = ev.events.find((e) => e.type === 'run.status' && e.data.status === 'running')!;
      return { placeMs: Date.parse(bound.ts) - Date.parse(life.created_at) };
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}
async function registered(n: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const list = (await (await fetch(`${url}/v1/planes`, { headers: { 'X-Service-Token': operator } })).json()) as { agents: Array<{ state: string }> };
    if (list.agents.length === n && list.agents.every((a) => a.state === 'free')) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${n} agents did not register`);
}

const agents: AgentProc[] = [];
const rows: Array<{ n: number; runsPerMin: number; placeP50: number; placeP99: number }> = [];
try {
  for (const n of [1, 2, 4]) {
    while (agents.length < n) {
      agents.push(await startAgentProcess('dom', { PLANE_AGENT_SECRET: SECRET, PLANE_REGISTER_URL: url, PLANE_HEARTBEAT_SECONDS: '1', PLANE_WARM_POOL: '1', PLANE_RECORD: '0' }));
    }
    await registered(n);
    await Promise.all(Array.from({ length: n }, async () => ended(await submit()))); // every agent's pool warm
    const t0 = performance.now();
    await Promise.all(Array.from({ length: BATCH }, async () => ended(await submit())));
    const runsPerMin = (BATCH / (performance.now() - t0)) * 60_000;
    const single: number[] = [];
    for (let i = 0; i < SINGLE; i++) single.push((await ended(await submit())).placeMs);
    rows.push({ n, runsPerMin, placeP50: pct(single, 50), placeP99: pct(single, 99) });
  }
} finally {
  for (const a of agents) await a.stop();
  await gw.close();
  await site.close();
}

const base = rows[0]!.runsPerMin;
console.log(`bench:fleet  ${steps.length}-step plan, dom_plane agents registered with one gateway (SQLite), batch of ${BATCH} runs, ${SINGLE} single runs for placement`);
console.log('agents  runs/min  scaling  placement p50  placement p99');
for (const r of rows) console.log(`${String(r.n).padStart(6)}  ${f(r.runsPerMin).padStart(8)}  ${f(r.runsPerMin / base, 2).padStart(6)}x  ${f(r.placeP50, 0).padStart(10)} ms  ${f(r.placeP99, 0).padStart(10)} ms`);
console.log(`load average ${f(load0, 2)} at start, ${f(loadavg()[0]!, 2)} at end (${cpus().length} cores)`);
