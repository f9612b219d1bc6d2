// bench/recovery: time from SIGKILL of the gateway executing a run to that
// run's recovery (ended runner_lost), over N kills, in two set-ups:
//   embedded: one gateway on SQLite, killed mid-run and started again on the
//             same data dir, as a supervisor would (restart time included);
//   replica:  two replicas on PostgreSQL + Redis, the runner replica killed; the
//             edge replica recovers the run (no restart involved).
// Usage: npm run bench:recovery [-- --kills 10 --mode embedded|replica|both]
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { startGatewayProcess, type GatewayProcess } from '../../test/support/gateway-process.ts';
import { request, until } from '../../test/support/gateway.ts';
import { startPostgres } from '../../test/support/postgres.ts';
import { startRedis } from '../../test/support/redis.ts';

const args = process.argv.slice(2);
const arg = (name: string, dflt: string) => (args.includes(`--${name}`) ? args[args.indexOf(`--${name}`) + 1]! : dflt);
const kills = Number(arg('kills', '10')) || 10;
const mode = arg('mode', 'both');
const token = 'r'.repeat(64);
// a run that is mid-step (its dom_plane browser open) when its gateway dies
const plan = [{ intent: 'wait', type: 'wait', seconds: 600 }];

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const fmt = (xs: number[]) => `p50 ${pct(xs, 50).toFixed(0)} ms, p95 ${pct(xs, 95).toFixed(0)} ms, max ${Math.max(...xs).toFixed(0)} ms`;

async function setup(): Promise<{ dir: string; env: Record<string, string> }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'runplane-bench-recovery-'));
  await writeFile(path.join(dir, 'keys.json'), JSON.stringify({ tenant_keys: { [token]: { tenant_id: 'bench', rate_limit_per_minute: 0, max_concurrent_runs: 1000 } } }));
  return { dir, env: { SERVICE_DATA_DIR: dir, SERVICE_TENANT_KEYS_PATH: path.join(dir, 'keys.json'), SERVICE_RUNNER: 'on', SERVICE_PLANES: 'local', SERVICE_LOG_LEVEL: 'error' } };
}

async function startRun(gw: GatewayProcess): Promise<string> {
  const accepted = await request(gw.url, 'POST', '/v1/predict', { token, body: { plan, detached: true, compute_backend: 'dom_plane' } });
  const runId = accepted.body.run_id as string;
  await until(async () => (await request(gw.url, 'GET', `/v1/runs/${runId}`, { token })).body.phase === 'running', 60_000);
  return runId;
}

const recovered = (gw: GatewayProcess, runId: string) => until(async () => (await request(gw.url, 'GET', `/v1/runs/${runId}`, { token })).body.halt_class === 'runner_lost', 120_000);

async function embedded(): Promise<void> {
  const { dir, env } = await setup();
  const restartMs: number[] = [];
  const recoverMs: number[] = [];
  let gw: GatewayProcess | undefined = await startGatewayProcess(env);
  try {
    for (let i = 0; i < kills; i++) {
      const runId = await startRun(gw);
      gw.child.kill('SIGKILL');
      await gw.exited;
      const killedAt = performance.now();
      gw = await startGatewayProcess(env);
      restartMs.push(performance.now() - killedAt);
      await recovered(gw, runId);
      recoverMs.push(performance.now() - killedAt);
    }
  } finally {
    await gw?.stop();
    await rm(dir, { recursive: true, force: true });
  }
  console.log(`embedded (SQLite), ${kills} SIGKILLs of the gateway mid-run, then a restart on the same data dir:`);
  console.log(`  restart (kill to listening): ${fmt(restartMs)}`);
  console.log(`  kill to run recovered:       ${fmt(recoverMs)}`);
}

async function replica(): Promise<void> {
  const [pg, redis] = await Promise.all([startPostgres(), startRedis()]);
  const { dir, env } = await setup();
  const shared = { ...env, SERVICE_DATABASE_URL: pg.url, SERVICE_REDIS_URL: redis.url };
  const recoverMs: number[] = [];
  const edge = await startGatewayProcess({ ...shared, SERVICE_RUNNER: 'off' });
  let runner: GatewayProcess | undefined;
  try {
    for (let i = 0; i < kills; i++) {
      runner = await startGatewayProcess(shared);
      const runId = await startRun(edge);
      runner.child.kill('SIGKILL');
      await runner.exited;
      runner = undefined;
      const killedAt = performance.now();
      await recovered(edge, runId);
      recoverMs.push(performance.now() - killedAt);
    }
  } finally {
    await runner?.stop();
    await edge.stop();
    await Promise.all([pg.stop(), redis.stop()]);
    await rm(dir, { recursive: true, force: true });
  }
  console.log(`replica (PostgreSQL + Redis, lease ${process.env.SERVICE_RUN_LEASE_SECONDS ?? 30} s), ${kills} SIGKILLs of the runner replica mid-run, the edge replica recovers:`);
  console.log(`  kill to run recovered:       ${fmt(recoverMs)}`);
}

console.log(`bench/recovery: load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
if (mode !== 'replica') await embedded();
if (mode !== 'embedded') await replica();
