// CPU seconds by kind of process, for the benches that compare the gateway with a
// plain script: the node process itself (process.cpuUsage) and every process below
// it (agents, Chromium's processes by --type, ffmpeg), read from /proc/<pid>/stat
// (utime+stime, and cutime+cstime for the children a process reaped).
// A sampler child looks at the tree every second so that processes which start and
// exit inside the window are seen and named; what such a process used after its
// last sample is recovered from its parent's reaped-children time (the zygote
// reaps renderers, the agent reaps ffmpeg), so a run's renderer and recorder are
// billed whole. The sampler is a process of its own: its CPU is not in the figures.
// Usage: const w = await watchCpu('gateway (node)'); ...; const byKind = await w.stop();
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

const TICK = 100; // USER_HZ on Linux
const SAMPLER_FLAG = '--cpu-sampler';
/** how often the tree is looked at: often enough to name a run's renderer and recorder (their tails come from the reaper) */
const SAMPLE_MS = 1000;

interface Proc {
  pid: number;
  ppid: number;
  kind: string;
  /** its own CPU seconds, all threads */
  cpu: number;
  /** CPU seconds of the children it has reaped (and theirs) */
  reaped: number;
}

export function kindOf(cmd: string): string {
  if (cmd.includes(SAMPLER_FLAG)) return 'sampler';
  if (/ffmpeg/.test(cmd)) return 'ffmpeg (recording)';
  if (/agents\/(dom|computer)\/main/.test(cmd)) return 'agent (node)';
  if (/--type=renderer/.test(cmd)) return 'chromium renderer';
  if (/--type=gpu/.test(cmd)) return 'chromium gpu';
  if (/--type=(utility|zygote)/.test(cmd)) return 'chromium utility+zygote';
  if (/chrom/.test(cmd)) return 'chromium browser';
  return `other (${cmd.split(' ')[0]?.split('/').pop() ?? '?'})`;
}

const kinds = new Map<number, string>();
/** Every process below root: one pass over /proc/<pid>/stat (ppid, CPU), the command line read once per new pid. */
function tree(root: number): Proc[] {
  const all = new Map<number, Omit<Proc, 'kind' | 'pid'>>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'latin1');
    } catch {
      continue; // gone meanwhile
    }
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    all.set(Number(name), { ppid: Number(f[1]), cpu: (Number(f[11]) + Number(f[12])) / TICK, reaped: (Number(f[13]) + Number(f[14])) / TICK });
  }
  const kids = new Map<number, number[]>();
  for (const [pid, p] of all) kids.set(p.ppid, [...(kids.get(p.ppid) ?? []), pid]);
  const out: Proc[] = [];
  const todo = [root];
  while (todo.length > 0) {
    for (const k of kids.get(todo.pop()!) ?? []) {
      if (!kinds.has(k)) {
        let cmd = '';
        try {
          cmd = readFileSync(`/proc/${k}/cmdline`, 'latin1').replace(/\0/g, ' ');
        } catch {
          // gone meanwhile: named by what it was not
        }
        kinds.set(k, kindOf(cmd));
      }
      out.push({ pid: k, kind: kinds.get(k)!, ...all.get(k)! });
      todo.push(k);
    }
  }
  return out;
}

async function sampler(root: number): Promise<void> {
  const first = tree(root);
  const seen = new Map<number, Proc>();
  first.forEach((p) => seen.set(p.pid, p));
  process.stdout.write('ready\n');
  const timer = setInterval(() => tree(root).forEach((p) => seen.set(p.pid, p)), SAMPLE_MS);
  process.stdin.resume();
  await new Promise((r) => process.stdin.once('end', r));
  clearInterval(timer);
  const last = tree(root);
  last.forEach((p) => seen.set(p.pid, p));
  process.stdout.write(JSON.stringify({ first, seen: [...seen.values()], last }));
  process.exit(0);
}

/** CPU seconds by kind from the sampler's three views (a pure function, for the bench's report). */
export function cpuByKind(first: Proc[], seen: Proc[], last: Proc[]): Map<string, number> {
  const before = new Map(first.map((p) => [p.pid, p]));
  const alive = new Map(last.map((p) => [p.pid, p]));
  const by = new Map<string, number>();
  const add = (k: string, s: number) => by.set(k, (by.get(k) ?? 0) + Math.max(0, s));
  for (const p of seen) add(p.kind, p.cpu - (before.get(p.pid)?.cpu ?? 0));
  // the tail of the children that exited: reaped time gained, less what their samples showed
  for (const p of last) {
    const b = before.get(p.pid);
    if (!b || p.kind === 'sampler') continue;
    const gone = seen.filter((c) => c.ppid === p.pid && !alive.has(c.pid));
    const shown = gone.reduce((s, c) => s + c.cpu + c.reaped, 0);
    const tail = p.reaped - b.reaped - shown;
    const named = new Set(gone.map((c) => c.kind));
    // a child seen before it exited takes its own tail; ones never seen (shorter than a sample) are named by their reaper
    if (tail > 0.0005) add(named.size === 1 ? [...named][0]! : `exited, reaped by ${p.kind}`, tail);
  }
  by.delete('sampler');
  return by;
}

/** Starts watching this process and its tree; stop() gives CPU seconds by kind, this process as `self`. */
export async function watchCpu(self: string): Promise<{ stop(): Promise<Map<string, number>> }> {
  const child = spawn(process.execPath, [...process.execArgv.filter((a) => !a.startsWith('--cpu-prof')), import.meta.filename, SAMPLER_FLAG, String(process.pid)], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise((r) => child.once('exit', r));
  await new Promise<void>((resolve, reject) => {
    const check = () => (out.startsWith('ready\n') ? resolve() : undefined);
    child.stdout.on('data', check);
    child.once('exit', () => reject(new Error('the cpu sampler exited before its first look')));
  });
  const self0 = process.cpuUsage();
  return {
    async stop() {
      const own = process.cpuUsage(self0);
      child.stdin.end();
      await exited;
      const got = JSON.parse(out.slice('ready\n'.length)) as { first: Proc[]; seen: Proc[]; last: Proc[] };
      const by = cpuByKind(got.first, got.seen, got.last);
      by.set(self, (own.user + own.system) / 1e6);
      return by;
    },
  };
}

/** A table of CPU seconds per run by kind, one column per side. */
export function cpuTable(sides: Array<{ name: string; runs: number; byKind: Map<string, number> }>): string[] {
  const kindsSeen = [...new Set(sides.flatMap((s) => [...s.byKind.keys()]))].sort();
  const cell = (s: (typeof sides)[number], k: string) => ((s.byKind.get(k) ?? 0) / s.runs).toFixed(3).padStart(12);
  const lines = [`CPU-s per run by process kind${''.padEnd(7)}|${sides.map((s) => s.name.padStart(12)).join(' |')}`];
  for (const k of kindsSeen) lines.push(`${k.padEnd(36)}|${sides.map((s) => cell(s, k)).join(' |')}`);
  const total = (s: (typeof sides)[number]) => ([...s.byKind.values()].reduce((a, b) => a + b, 0) / s.runs).toFixed(3).padStart(12);
  lines.push(`${'total'.padEnd(36)}|${sides.map(total).join(' |')}`);
  return lines;
}

if (process.argv[2] === SAMPLER_FLAG) await sampler(Number(process.argv[3]));
