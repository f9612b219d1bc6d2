// bench/runs/profile: where a gateway run's CPU goes. Starts the same gateway as
// bench/runs/run.ts (local agents, warm pool of 4, 4 active runs), warms it, then
// runs `--runs N` runs on each of `--concurrent C` clients while sampling the CPU
// time of every process it started (the gateway's own node process, the agents,
// their Chromium processes by type, ffmpeg) from /proc, and prints the CPU seconds
// per kind of process with the runs per minute. Add `node --cpu-prof` to see the
// gateway process itself.
// The sampling runs in a child process of its own (listed as "sampler"), so its
// CPU is not billed to the gateway.
// Usage: [PLANE_DOM_BROWSER=headless-shell] node --import tsx bench/runs/profile.ts [--runs 3 --concurrent 4 --capture trace --ask trace --plan form]
import { mkdtemp, rm, readdir, readFile } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import { tmpdir, loadavg } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { startSite } from '../../test/support/site.ts';
import { startBenchGateway } from './gateway.ts';
import { plan, type PlanName } from './plan.ts';
import { headlessBrowser } from '../../agents/core/chromium.ts';
import { numArg, strArg } from '../stats.ts';

const RUNS = numArg('runs', 3);
const CONCURRENT = numArg('concurrent', 4);
const CAPTURE = strArg('capture', 'model_io');
const PLAN = strArg('plan', 'click') as PlanName;
const ASK = strArg('ask', '');
const TICK = 100; // clock ticks per second on Linux
const SAMPLER = process.argv.includes('--sampler');
/** the process whose tree is sampled: this one, or the bench that started this sampler */
const ROOT = SAMPLER ? process.ppid : process.pid;

interface Proc {
  pid: number;
  ppid: number;
  kind: string;
  cpu: number;
}
const kinds = new Map<number, string>();
function kindOf(cmd: string): string {
  if (/--sampler/.test(cmd)) return 'sampler (this bench, not counted)';
  if (/ffmpeg/.test(cmd)) return 'ffmpeg (recording)';
  if (/agents\/dom\/main/.test(cmd)) return 'dom agent (node)';
  if (/--type=renderer/.test(cmd)) return 'chromium renderer';
  if (/--type=gpu/.test(cmd)) return 'chromium gpu';
  if (/--type=(utility|zygote)/.test(cmd)) return 'chromium utility+zygote';
  if (/chrom/.test(cmd)) return 'chromium browser';
  return `other (${cmd.split(' ')[0]?.split('/').pop() ?? '?'})`;
}
/** Every process below this one (walked through /proc/<pid>/task/<tid>/children), with its CPU seconds. */
async function tree(): Promise<Map<number, Proc>> {
  const mine = new Map<number, Proc>();
  const todo = [ROOT];
  while (todo.length > 0) {
    const pid = todo.pop()!;
    for (const tid of await readdir(`/proc/${pid}/task`).catch(() => [] as string[])) {
      const kids = (await readFile(`/proc/${pid}/task/${tid}/children`, 'utf8').catch(() => '')).split(' ').filter(Boolean).map(Number);
      for (const k of kids) {
        const stat = await readFile(`/proc/${k}/stat`, 'utf8').catch(() => '');
        if (!stat) continue;
        if (!kinds.has(k)) kinds.set(k, kindOf((await readFile(`/proc/${k}/cmdline`, 'utf8').catch(() => '')).replace(/\0/g, ' ')));
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        // its own CPU (a process that exits between two samples loses its last half second)
        const cpu = (Number(f[11]) + Number(f[12])) / TICK;
        mine.set(k, { pid: k, ppid: pid, kind: kinds.get(k)!, cpu });
        todo.push(k);
      }
    }
  }
  return mine;
}

if (SAMPLER) {
  // sample until stdin closes, then print what was seen
  const seen = new Map<number, Proc>();
  const first = await tree();
  const timer = setInterval(() => void tree().then((t) => t.forEach((p) => seen.set(p.pid, p))), 500);
  process.stdin.resume();
  await new Promise((r) => process.stdin.once('end', r));
  clearInterval(timer);
  (await tree()).forEach((p) => seen.set(p.pid, p));
  process.stdout.write(JSON.stringify({ first: [...first.values()], seen: [...seen.values()] }));
  process.exit(0);
}

const site = await startSite();
const steps = plan(site.url, PLAN);
const dir = await mkdtemp(path.join(tmpdir(), 'runplane-bench-profile-'));
const { gw, url, token } = await startBenchGateway(dir, new Writable({ write: (_c, _e, cb) => cb() }), CAPTURE);

async function oneRun(): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/predict`, { method: 'POST', headers: { 'X-Service-Token': token, 'Content-Type': 'application/json' }, body: JSON.stringify({ plan: steps, detached: false, ...(ASK ? { capture_mode: ASK } : {}) }) });
  const body = (await res.json()) as { status: string; summary?: string };
  if (body.status !== 'succeeded') throw new Error(`run ended ${body.status}: ${body.summary ?? ''}`);
  return performance.now() - t0;
}

await Promise.all(Array.from({ length: 4 }, () => oneRun()));
await Promise.all(Array.from({ length: 4 }, () => oneRun()));
const sampler = spawn(process.execPath, [...process.execArgv.filter((a) => !a.startsWith('--cpu-prof')), import.meta.filename, '--sampler'], { stdio: ['pipe', 'pipe', 'inherit'] });
let report = '';
sampler.stdout.on('data', (d: Buffer) => (report += d.toString()));
const sampled = new Promise((r) => sampler.once('exit', r));
// the sampler's first look is taken before the level starts
await new Promise((r) => setTimeout(r, 3000));
const self0 = process.cpuUsage();
const load0 = loadavg()[0]!;
const t0 = performance.now();
const walls: number[] = [];
await Promise.all(Array.from({ length: CONCURRENT }, async () => {
  for (let i = 0; i < RUNS; i++) walls.push(await oneRun());
}));
const minutes = (performance.now() - t0) / 60_000;
// the planes of the last runs close after their results
await new Promise((r) => setTimeout(r, 3000));
const self = process.cpuUsage(self0);
sampler.stdin.end();
await sampled;
const got = JSON.parse(report) as { first: Proc[]; seen: Proc[] };
const before = new Map(got.first.map((p) => [p.pid, p]));
const seen = new Map(got.seen.map((p) => [p.pid, p]));
const byKind = new Map<string, { cpu: number; n: number; started: number }>();
for (const p of seen.values()) {
  const k = byKind.get(p.kind) ?? { cpu: 0, n: 0, started: 0 };
  k.cpu += p.cpu - (before.get(p.pid)?.cpu ?? 0);
  k.n += 1;
  if (!before.has(p.pid)) k.started += 1;
  byKind.set(p.kind, k);
}
byKind.set('gateway + bench (node)', { cpu: (self.user + self.system) / 1e6, n: 1, started: 0 });
const total = [...byKind.entries()].filter(([kind]) => !kind.startsWith('sampler')).reduce((s, [, k]) => s + k.cpu, 0);
const runs = walls.length;
console.log(`bench/runs/profile: ${PLAN} plan, ${runs} runs at ${CONCURRENT} concurrent on ${headlessBrowser()}, capture ${CAPTURE}, ${(runs / minutes).toFixed(1)} runs/min, load ${load0.toFixed(2)} -> ${loadavg()[0]!.toFixed(2)}`);
console.log('process kind              | CPU s | per run | share | processes (started during the level)');
for (const [kind, k] of [...byKind.entries()].sort((a, b) => b[1].cpu - a[1].cpu)) {
  console.log(`${kind.padEnd(25)} | ${k.cpu.toFixed(1).padStart(5)} | ${(k.cpu / runs).toFixed(2).padStart(7)} | ${((100 * k.cpu) / total).toFixed(0).padStart(4)}% | ${k.n} (${k.started})`);
}
console.log(`total CPU s per run: ${(total / runs).toFixed(2)} (2 cores give ${(120 / (total / runs)).toFixed(1)} runs/min at most)`);
await gw.close();
await site.close();
await rm(dir, { recursive: true, force: true });
process.exit(0);
