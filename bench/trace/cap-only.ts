// scratch: capacity rounds only (profiling)
import { spawn } from 'node:child_process';
import path from 'node:path';
import sharp from 'sharp';
import { ingestCapacity } from './capacity.ts';
const W = 640, H = 400;
async function screenshot(seed: number): Promise<Buffer> {
  const raw = Buffer.alloc(W * H * 3);
  for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) {
    const i = (y * W + x) * 3; const band = Math.floor(y / 40) % 3;
    const ink = (x * 7 + y * 13 + seed) % 97 < 6 && y % 40 > 10 && y % 40 < 30;
    const v = ink ? 30 : 235 - band * 20; raw[i] = v; raw[i + 1] = v; raw[i + 2] = ink ? 30 : 245;
  }
  return sharp(raw, { raw: { width: W, height: H, channels: 3 } }).png().toBuffer();
}
const server = spawn(process.execPath, [...(process.env.BENCH_SERVER_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_SERVER_PROF] : []), '--import', 'tsx', path.join(import.meta.dirname, 'server.ts')], { stdio: ['ignore', 'pipe', 'inherit'] });
const [url, , key] = await new Promise<string[]>((resolve) => server.stdout.once('data', (d: Buffer) => resolve(d.toString().trim().split(' '))));
const shots = await Promise.all([0, 1, 2, 3].map(screenshot));
for (const n of [8, 8, 8, 8]) {
  const r = await ingestCapacity({ url: url!, key: key!, serverPid: server.pid!, sessions: n, steps: 500, batchSteps: 10, shots, tag: `${n}-${Math.random().toString(36).slice(2, 8)}` });
  console.log(n, r.stepsPerSec.toFixed(0), r.ingestCpuMsPerStep.toFixed(2), r.clientCpuMsPerStep.toFixed(2));
}
server.kill('SIGTERM');
await new Promise((r) => server.once('exit', r));
