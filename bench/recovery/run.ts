// bench/recovery: time from SIGKILL of the gateway executing a run to that run's
// recovery (ended runner_lost), on the embedded default: the gateway is killed
// mid-run and started again on the same data dir, as a supervisor would.
// Two figures per kill: the restart alone (start to listening) and kill to
// recovered (which includes it). Usage: npm run bench:recovery [-- --kills 10]
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { startGatewayProcess, type GatewayProcess } from '../../test/support/gateway-process.ts';
import { request, until } from '../../test/support/gateway.ts';

const args = process.argv.slice(2);
const kills = Number(args[args.indexOf('--kills') + 1] || 10) || 10;
const token = 'r'.repeat(64);
const dir = await mkdtemp(path.join(tmpdir(), 'runplane-bench-recovery-'));
await writeFile(path.join(dir, 'keys.json'), JSON.stringify({ tenant_keys: { [token]: { tenant_id: 'bench', rate_limit_per_minute: 0, max_concurrent_runs: 1000 } } }));
const env = {
  SERVICE_DATA_DIR: dir,
  SERVICE_TENANT_KEYS_PATH: path.join(dir, 'keys.json'),
  SERVICE_RUNNER: 'on',
  SERVICE_PLANES: 'local',
  SERVICE_LOG_LEVEL: 'error',
};
// a run that is mid-step (its dom_plane browser open) when the gateway dies
const plan = [{ intent: 'wait', type: 'wait', seconds: 600 }];

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const restartMs: number[] = [];
const recoverMs: number[] = [];
let gw: GatewayProcess | undefined = await startGatewayProcess(env);
try {
  for (let i = 0; i < kills; i++) {
    const accepted = await request(gw.url, 'POST', '/v1/predict', { token, body: { plan, detached: true, compute_backend: 'dom_plane' } });
    const runId = accepted.body.run_id as string;
    await until(async () => (await request(gw!.url, 'GET', `/v1/runs/${runId}`, { token })).body.phase === 'running', 60_000);
    gw.child.kill('SIGKILL');
    await gw.exited;
    const killedAt = performance.now();
    gw = await startGatewayProcess(env);
    restartMs.push(performance.now() - killedAt);
    await until(async () => (await request(gw!.url, 'GET', `/v1/runs/${runId}`, { token })).body.halt_class === 'runner_lost', 60_000);
    recoverMs.push(performance.now() - killedAt);
  }
} finally {
  await gw?.stop();
  await rm(dir, { recursive: true, force: true });
}
const fmt = (xs: number[]) => `p50 ${pct(xs, 50).toFixed(0)} ms, p95 ${pct(xs, 95).toFixed(0)} ms, max ${Math.max(...xs).toFixed(0)} ms`;
console.log(`bench/recovery: ${kills} SIGKILLs of the embedded gateway mid-run, load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
console.log(`restart (kill to listening): ${fmt(restartMs)}`);
console.log(`kill to run recovered:       ${fmt(recoverMs)}`);
