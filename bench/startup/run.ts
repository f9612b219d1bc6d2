// bench/startup: how long the service's own processes take to start, compiled
// (build/, what npm start and the gateway's agents run) beside the same
// sources under tsx (what they ran before), in one run:
//   - an agent of each plane, from spawn to its listening line (its warm browser comes after, apart);
//   - the gateway on its embedded default, from spawn to GET /v1/ready 200;
//   - apart: the Chromium warm-up, from a ready gateway to the first dom_plane run's end (a `wait` step).
// Usage: npm run bench:startup [-- --rounds 7]
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { build, builtPath, REPO_ROOT } from '../../shared/build.mjs';
import { numArg, pct } from '../stats.ts';

const rounds = numArg('rounds', 7);
type Mode = 'compiled' | 'tsx';
const argsOf = (mode: Mode, source: string) => (mode === 'compiled' ? [builtPath(source)] : ['--import', 'tsx', path.join(REPO_ROOT, source)]);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await gone;
  clearTimeout(t);
}

/** Spawn to the agent's listening line, in ms. */
async function agentStart(mode: Mode, plane: 'dom' | 'computer'): Promise<number> {
  const t0 = performance.now();
  const child = spawn(process.execPath, argsOf(mode, `agents/${plane}/main.ts`), {
    cwd: REPO_ROOT,
    env: { ...process.env, PLANE_HTTP_PORT: '0', PLANE_GRPC_PORT: '0', PLANE_DATA_DIR: mkdtempSync(path.join(tmpdir(), 'bench-agent-')), PLANE_ALLOW_PRIVATE_NETWORKS: '1', PLANE_PARENT_PID: String(process.pid) },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (c) => reject(new Error(`agent exited ${c}`)));
  });
  const ms = performance.now() - t0;
  await stop(child);
  return ms;
}

/** Spawn to /v1/ready 200, in ms; with `warm`, also a ready gateway to its first dom_plane run's end. */
async function gatewayStart(mode: Mode, warm: boolean): Promise<{ ready: number; firstRun?: number }> {
  const token = 'b'.repeat(64);
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const t0 = performance.now();
  const child = spawn(process.execPath, argsOf(mode, 'gateway/start.ts'), {
    cwd: REPO_ROOT,
    env: { ...process.env, SERVICE_PORT: String(port), SERVICE_DATA_DIR: mkdtempSync(path.join(tmpdir(), 'bench-gw-')), SERVICE_API_TOKEN: token, SERVICE_LOG_LEVEL: 'warn', SERVICE_ALLOW_PRIVATE_NETWORKS: '1' },
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  const base = `http://127.0.0.1:${port}`;
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`gateway exited ${child.exitCode}`);
      if ((await fetch(`${base}/v1/ready`).then((r) => r.status, () => 0)) === 200) break;
      await sleep(10);
    }
    const ready = performance.now() - t0;
    if (!warm) return { ready };
    const t1 = performance.now();
    const headers = { 'X-Service-Token': token, 'Content-Type': 'application/json' };
    const plan = { steps: [{ intent: 'wait', type: 'wait', seconds: 0 }], runtime: { compute_backend: 'dom_plane' } };
    const { run_id } = (await (await fetch(`${base}/v1/predict`, { method: 'POST', headers, body: JSON.stringify({ plan }) })).json()) as { run_id: string };
    for (;;) {
      const s = (await (await fetch(`${base}/v1/runs/${run_id}/status`, { headers })).json()) as { status: string };
      if (!['queued', 'running'].includes(s.status)) break;
      await sleep(20);
    }
    return { ready, firstRun: performance.now() - t1 };
  } finally {
    await stop(child);
  }
}

const fmt = (xs: number[]) => `${String(Math.round(pct(xs, 50))).padStart(6)} ${String(Math.round(pct(xs, 90))).padStart(6)}`;

await build();
process.stdout.write(`bench/startup: ${rounds} rounds each, load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}\n`);
process.stdout.write(`${'process'.padEnd(34)} ${'compiled p50  p90'.padStart(20)} ${'tsx p50  p90'.padStart(15)}  ratio\n`);
for (const plane of ['dom', 'computer'] as const) {
  const times: Record<Mode, number[]> = { compiled: [], tsx: [] };
  for (let i = 0; i < rounds; i++) for (const mode of ['compiled', 'tsx'] as const) times[mode].push(await agentStart(mode, plane));
  process.stdout.write(`${`${plane} agent: spawn -> listening (ms)`.padEnd(34)} ${fmt(times.compiled).padStart(20)} ${fmt(times.tsx).padStart(15)}  ${(pct(times.compiled, 50) / pct(times.tsx, 50)).toFixed(2)}\n`);
}
const ready: Record<Mode, number[]> = { compiled: [], tsx: [] };
const firstRun: number[] = [];
for (let i = 0; i < rounds; i++) {
  for (const mode of ['compiled', 'tsx'] as const) {
    const r = await gatewayStart(mode, mode === 'compiled');
    ready[mode].push(r.ready);
    if (r.firstRun !== undefined) firstRun.push(r.firstRun);
  }
}
process.stdout.write(`${'gateway: spawn -> /v1/ready (ms)'.padEnd(34)} ${fmt(ready.compiled).padStart(20)} ${fmt(ready.tsx).padStart(15)}  ${(pct(ready.compiled, 50) / pct(ready.tsx, 50)).toFixed(2)}\n`);
process.stdout.write(`${'apart: ready -> first dom run (ms)'.padEnd(34)} ${fmt(firstRun).padStart(20)}   (agent start, Chromium warm-up, one wait step)\n`);
process.stdout.write(`load average after: ${loadavg().map((l) => l.toFixed(2)).join(' ')}\n`);
