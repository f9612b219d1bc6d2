// bench/trace/in-process: what a run's trace stream costs the gateway process,
// over loopback HTTP through the gateway's own server and pipeline (as before
// 2026-12-07) against handed to the mounted ingest in process (the destination's
// fetch, what the gateway's recorder uses now). A real gateway (runner off, the
// trace-ingest plugin mounted) and the SDK sessions run in this one process, as
// the gateway's recorder does; each session records what a 20-step run does (a
// step record, a post screenshot at 1280x720, two events), closes, and its stream
// drains. The modes alternate; CPU is this process's (all threads), per session.
// Usage: node build/bench/trace/in-process.js [--sessions 8 --rounds 3 --steps 20]
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import sharp from 'sharp';
import { loadConfig } from '../../gateway/config.ts';
import { createGateway } from '../../gateway/server.ts';
import { DebugSession } from '../../sdk/index.ts';
import { numArg, pct } from '../stats.ts';

const SESSIONS = numArg('sessions', 8);
const ROUNDS = numArg('rounds', 3);
const STEPS = numArg('steps', 20);
const quiet = { warn: () => undefined, debug: () => undefined };

/** A page-like 1280x720 PNG (bands and text-like ink), different per seed. */
async function screenshot(seed: number): Promise<Buffer> {
  const [W, H] = [1280, 720];
  const raw = Buffer.alloc(W * H * 3);
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      const i = (y * W + x) * 3;
      const ink = (x * 7 + y * 13 + seed) % 97 < 6 && y % 40 > 10 && y % 40 < 30;
      const v = ink ? 30 : 235 - (Math.floor(y / 40) % 3) * 20;
      raw[i] = v;
      raw[i + 1] = v;
      raw[i + 2] = ink ? 30 : 245;
    }
  }
  return sharp(raw, { raw: { width: W, height: H, channels: 3 } }).png().toBuffer();
}

const dir = await mkdtemp(path.join(tmpdir(), 'runplane-bench-inproc-'));
const keys = path.join(dir, 'keys.json');
await writeFile(keys, JSON.stringify({ tenant_keys: { ['k'.repeat(64)]: { tenant_id: 'bench', rate_limit_per_minute: 0 } } }));
const config = loadConfig({ SERVICE_PORT: '0', SERVICE_DATA_DIR: path.join(dir, 'gw'), SERVICE_TENANT_KEYS_PATH: keys, SERVICE_RUNNER: 'off' });
const gw = await createGateway(config, { logStream: new Writable({ write: (_c, _e, cb) => cb() }) });
const url = await gw.listen();
const dest = gw.services.plugins.traceDestination()!;
const dsn = await dest.dsnFor('bench', url);
const shots = await Promise.all(Array.from({ length: 8 }, (_, i) => screenshot(i)));

let n = 0;
async function session(fetchImpl: typeof fetch | undefined): Promise<void> {
  const runId = `inproc-${n++}`;
  const s = new DebugSession({ runId, clientName: 'bench', outDir: path.join(dir, 'bundles', runId), dsn, logger: quiet, stream: { lingerMs: 250, fetch: fetchImpl } });
  for (let i = 0; i < STEPS; i++) {
    s.recordStep({ step_index: i, step_id: `${runId}-${i}`, status: 'passed', action: { type: 'CLICK', params: { x: i, y: i } } });
    await s.attachObservation(i, 'post', shots[(i + n) % shots.length]!);
    s.recordEvent({ layer: 'planner', kind: 'propose', step_index: i, payload: { n: i } });
    s.recordEvent({ layer: 'verifier', kind: 'check', step_index: i, payload: { ok: true } });
    // steps of a run are seconds apart: each step's records go out before the next one's
    await new Promise((r) => setTimeout(r, 20));
  }
  await s.close();
  if (s.streamStats!.failed > 0 || s.streamStats!.dropped > 0) throw new Error(`session ${runId}: ${JSON.stringify(s.streamStats)}`);
}

async function measure(mode: 'http' | 'in process'): Promise<number> {
  const c0 = process.cpuUsage();
  await Promise.all(Array.from({ length: SESSIONS }, () => session(mode === 'http' ? undefined : dest.fetch)));
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1000 / SESSIONS;
}

const load0 = loadavg()[0]!;
await measure('http');
await measure('in process');
const got: Record<string, number[]> = { http: [], 'in process': [] };
for (let r = 0; r < ROUNDS; r++) {
  for (const mode of r % 2 === 0 ? (['http', 'in process'] as const) : (['in process', 'http'] as const)) got[mode]!.push(await measure(mode));
}
console.log(`bench/trace/in-process: ${SESSIONS} concurrent sessions of ${STEPS} steps (a 1280x720 post PNG a step), ${ROUNDS} rounds alternated, load ${load0.toFixed(2)} -> ${loadavg()[0]!.toFixed(2)}`);
for (const [mode, xs] of Object.entries(got)) console.log(`${mode.padEnd(11)} CPU ms per session (this process): p50 ${pct(xs, 50).toFixed(0)}, all ${xs.map((x) => x.toFixed(0)).join(' / ')}`);
await gw.close();
await rm(dir, { recursive: true, force: true });
process.exit(0);
