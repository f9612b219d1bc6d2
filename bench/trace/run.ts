// bench/trace: on loopback, with the ingest service in its own process,
//   (a) ingest throughput: step records/s and screenshots/s with 1 and 8
//       concurrent SDK sessions streaming (each step: a step record, a pre and
//       a post screenshot, two decision events, step costs), counted from
//       session start until every session closed and flushed;
//   (b) the ingest's own capacity, driven by a client that replays the SDK's
//       batches from bodies built up front (capacity.ts), so the client's
//       CPU is not what limits the figure;
//   (c) SDK overhead per recorded step (the same calls, close excluded) with
//       streaming off and on, side by side.
// Usage: npm run bench:trace [-- --steps 200 --width 640 --height 400]
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { DebugSession } from '../../sdk/index.ts';
import { cpuSeconds, numArg } from '../stats.ts';
import { ingestCapacity } from './capacity.ts';
import { builtPath } from '../../shared/build.mjs';

const STEPS = numArg('steps', 200);
const W = numArg('width', 640);
const H = numArg('height', 400);
const CAPACITY_STEPS = numArg('capacity-steps', 500);

async function screenshot(seed: number): Promise<Buffer> {
  // a page-like image: flat bands with some text-like noise, so PNG sizes are realistic
  const raw = Buffer.alloc(W * H * 3);
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      const i = (y * W + x) * 3;
      const band = Math.floor(y / 40) % 3;
      const ink = (x * 7 + y * 13 + seed) % 97 < 6 && y % 40 > 10 && y % 40 < 30;
      const v = ink ? 30 : 235 - band * 20;
      raw[i] = v;
      raw[i + 1] = v;
      raw[i + 2] = ink ? 30 : 245;
    }
  }
  return sharp(raw, { raw: { width: W, height: H, channels: 3 } }).png().toBuffer();
}

const quiet = { warn: () => undefined, debug: () => undefined };

// upload 'wait' is close() as before (bundle written and the stream drained);
// 'background' is what the gateway does: close() returns once the bundle is
// written and the stream drains after (uploadMs, awaited here so the numbers count it)
// paceMs spaces the steps as a real run does (steps take seconds there), so the
// background work of each step (PNG write, perceptual hash) is done before close
async function recordSession(runId: string, dsn: string | null, shots: Buffer[], out: string, upload: 'wait' | 'background' = 'wait', paceMs = 0): Promise<{ perStepMs: number; closeMs: number; uploadMs: number; dropped: number; cpuMsPerStep: number }> {
  const s = new DebugSession({ runId, clientName: 'bench', outDir: path.join(out, runId), dsn, logger: quiet, stream: { flushTimeoutMs: 120_000 } });
  let paused = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < STEPS; i++) {
    s.recordStep({ step_index: i, step_id: `${runId}-${i}`, status: 'passed', action: { type: 'CLICK', params: { x: i, y: i } } });
    await s.attachObservation(i, 'pre', shots[i % shots.length]!);
    await s.attachObservation(i, 'post', shots[(i + 1) % shots.length]!);
    s.recordEvent({ layer: 'planner', kind: 'propose', step_index: i, payload: { n: i } });
    s.recordEvent({ layer: 'verifier', kind: 'check', step_index: i });
    s.setStepCosts(i, { total_usd: 0.001, tokens_in: 1000, tokens_out: 20 });
    if (paceMs) {
      // the pause is not SDK time (timers overshoot on a busy machine): measured and left out
      const p0 = performance.now();
      await new Promise((r) => setTimeout(r, paceMs));
      paused += performance.now() - p0;
    }
  }
  const t1 = performance.now();
  await s.close(null, { upload });
  const t2 = performance.now();
  await s.uploaded();
  const t3 = performance.now();
  const c = process.cpuUsage(c0);
  return { perStepMs: (t1 - t0 - paused) / STEPS, closeMs: t2 - t1, uploadMs: t3 - t1, dropped: s.streamStats?.dropped ?? 0, cpuMsPerStep: (c.user + c.system) / 1000 / STEPS };
}

const server = spawn(process.execPath, [...(process.env.BENCH_SERVER_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_SERVER_PROF] : []), builtPath(path.join(import.meta.dirname, 'server.ts'))], { stdio: ['ignore', 'pipe', 'inherit'] });
const [url, dsn, key] = await new Promise<string[]>((resolve, reject) => {
  server.stdout.once('data', (d: Buffer) => resolve(d.toString().trim().split(' ')));
  server.once('exit', (c) => reject(new Error(`ingest server exited ${c}`)));
});
const out = await mkdtemp(path.join(tmpdir(), 'bench-trace-'));
try {
  const shots = await Promise.all([0, 1, 2, 3].map(screenshot));
  const avgPng = Math.round(shots.reduce((a, b) => a + b.length, 0) / shots.length / 1024);
  process.stdout.write(`ingest ${url}; ${STEPS} steps per session, 2 screenshots per step (${W}x${H} PNG, ~${avgPng} KiB)\n\n`);
  await recordSession('warmup', dsn!, shots, out);

  // CPU per step is what a busy machine does not distort much: wall-clock rates here swing 2x with the load average
  process.stdout.write('ingest throughput (streaming, end to end incl. close and flush); CPU per step of the SDK process and of the ingest process\n');
  process.stdout.write('| sessions | steps | step records/s | screenshots/s | dropped | SDK CPU ms/step | ingest CPU ms/step |\n|---:|---:|---:|---:|---:|---:|---:|\n');
  for (const n of [1, 8]) {
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    const s0 = cpuSeconds(server.pid!);
    const results = await Promise.all(Array.from({ length: n }, (_, k) => recordSession(`tp-${n}-${k}`, dsn!, shots, out)));
    const sec = (performance.now() - t0) / 1000;
    const c = process.cpuUsage(c0);
    const serverMs = (cpuSeconds(server.pid!) - s0) * 1000;
    const steps = n * STEPS;
    const dropped = results.reduce((a, r) => a + r.dropped, 0);
    process.stdout.write(`| ${n} | ${steps} | ${(steps / sec).toFixed(0)} | ${((2 * steps) / sec).toFixed(0)} | ${dropped} | ${((c.user + c.system) / 1000 / steps).toFixed(2)} | ${(serverMs / steps).toFixed(2)} |\n`);
  }

  process.stdout.write(`\ningest capacity: a client replaying the SDK's batches (${CAPACITY_STEPS} steps per session; per step a step record and its 2 events in one record, the costs once a batch, in JSON batches of 10 steps, 2 screenshots in multipart batches of 8)\n`);
  process.stdout.write('| sessions | steps | step records/s | screenshots/s | refused | client CPU ms/step | ingest CPU ms/step |\n|---:|---:|---:|---:|---:|---:|---:|\n');
  // the ingest's JIT and heap settle over the first few thousand records: one unreported round first
  await ingestCapacity({ url: url!, key: key!, serverPid: server.pid!, sessions: 8, steps: CAPACITY_STEPS, batchSteps: 10, shots, tag: 'warmup' });
  for (const n of [1, 8, 8]) {
    const r = await ingestCapacity({ url: url!, key: key!, serverPid: server.pid!, sessions: n, steps: CAPACITY_STEPS, batchSteps: 10, shots, tag: `${n}-${Math.random().toString(36).slice(2, 8)}` });
    process.stdout.write(`| ${n} | ${r.steps} | ${r.stepsPerSec.toFixed(0)} | ${(2 * r.stepsPerSec).toFixed(0)} | ${r.refused} | ${r.clientCpuMsPerStep.toFixed(2)} | ${r.ingestCpuMsPerStep.toFixed(2)} |\n`);
  }

  process.stdout.write('\nSDK overhead per recorded step (record_step + 2 screenshots + 2 events + step costs; close separate)\n');
  process.stdout.write('| streaming | close upload | steps paced | ms per step | close() returns, ms | upload drained, ms after close() began | SDK CPU ms/step, close and upload included |\n|---|---|---|---:|---:|---:|---:|\n');
  const rows = [['off', null, 'wait', 0], ['on', dsn!, 'wait', 0], ['on', dsn!, 'background', 0], ['on', dsn!, 'wait', 10], ['on', dsn!, 'background', 10]] as const;
  for (const [label, d, upload, pace] of rows) {
    const r = await recordSession(`oh-${label}-${upload}-${pace}`, d, shots, out, upload, pace);
    process.stdout.write(`| ${label} | ${upload} | ${pace ? `${pace} ms apart` : 'no'} | ${r.perStepMs.toFixed(3)} | ${r.closeMs.toFixed(0)} | ${r.uploadMs.toFixed(0)} | ${r.cpuMsPerStep.toFixed(2)} |\n`);
  }
} finally {
  server.kill('SIGTERM');
  await rm(out, { recursive: true, force: true });
}
