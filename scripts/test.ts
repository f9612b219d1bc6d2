// `npm test`: the type-check, the lint and every test file on both stores of
// record, as a pool of processes (RUNPLANE_TEST_JOBS at once, default 2, and one
// more while the host's CPU sits idle: scripts/test-pool.ts), the longest first so
// the pool ends together, never two of the heavy files (test/support/suite.cjs)
// at once. Each test file runs in a mocha process of its own (short files share
// one), with its own temp dir, ports, Redis and agents; the PostgreSQL files share one throwaway cluster, a
// database per gateway data dir (test/support/store.ts). A job's output is
// printed whole when it ends, so files never interleave; the end is the 15
// slowest files and one line CI reads ("tests: N passed, N failed").
//
//   node --import tsx scripts/test.ts [--jobs N] [--store sqlite|postgres] [--no-checks] [files...]
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { constants as osConstants, cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { build, REPO_ROOT } from '../shared/build.mjs';
import pg from 'pg';
import { openPool } from '../gateway/state/pg/db.ts';
import { startPostgres, type PgHandle } from '../test/support/postgres.ts';
import { IdleMeter, pick } from './test-pool.ts';

const require = createRequire(import.meta.url);
const SUITE = require('../test/support/suite.cjs') as { ALL: string[]; PG_SPEC: string[]; PG_SKIP: string[]; HEAVY: string[] };
const { slowestTable } = require('../test/support/reporter.cjs') as { slowestTable: (s: Record<string, number>, n?: number, cpu?: Record<string, number>) => string };
const NODE_OPTIONS = (require('../.mocharc.cjs') as { 'node-option': string[] })['node-option'].map((o) => `--${o}`);
const EXPECTED = JSON.parse(readFileSync(path.join(REPO_ROOT, 'test/support/file-seconds.json'), 'utf8')) as Record<string, number>;

type Store = 'sqlite' | 'postgres';
interface Job {
  name: string;
  cmd: string;
  args: string[];
  env: Record<string, string>;
  /** expected seconds, for the order */
  expect: number;
  /** keys of the files it runs ("<file>" on SQLite, "<file> [pg]" on PostgreSQL) */
  files: string[];
  store?: Store;
  /** runs of one of the heavy files: never two at once */
  heavy?: boolean;
}
interface Outcome {
  job: Job;
  code: number | null;
  seconds: number;
  out: string;
  times?: { seconds: Record<string, number>; cpu?: Record<string, number>; passes: number; failures: number; pending: number };
}

// files under SHORT expected seconds share a mocha process, up to BATCH seconds of them
const SHORT = 15;
const BATCH = 40;
// a job still running after this long is killed and counted failed (CI must end)
const JOB_LIMIT_MS = 25 * 60_000;
const UNKNOWN_SECONDS = 30;

function globToRegExp(glob: string): RegExp {
  let re = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '*' && glob[i + 1] === '*' && glob[i + 2] === '/') {
      re += '(?:.*/)?';
      i += 2;
    } else if (c === '*') re += '[^/]*';
    else re += c.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

function testFiles(dir = 'test', out: string[] = []): string[] {
  for (const e of readdirSync(path.join(REPO_ROOT, dir), { withFileTypes: true })) {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) testFiles(rel, out);
    else if (e.name.endsWith('.test.ts')) out.push(rel);
  }
  return out.sort();
}

/** The files of a store; named files run on PostgreSQL only when they are of its suite, or when it was asked for alone. */
function filesOf(store: Store, named: string[], only: boolean): string[] {
  const all = named.length > 0 ? named.map((f) => path.relative(REPO_ROOT, path.resolve(f))) : testFiles();
  if (store === 'sqlite' || (only && named.length > 0)) return all;
  const spec = SUITE.PG_SPEC.map(globToRegExp);
  const skip = SUITE.PG_SKIP.map(globToRegExp);
  return all.filter((f) => spec.some((r) => r.test(f)) && !skip.some((r) => r.test(f)));
}

const keyOf = (file: string, store: Store) => (store === 'postgres' ? `${file} [pg]` : file);

function mochaJobs(store: Store, files: string[]): Job[] {
  const sized = files.map((f) => ({ f, s: EXPECTED[keyOf(f, store)] ?? UNKNOWN_SECONDS })).sort((a, b) => b.s - a.s);
  const groups: Array<{ files: string[]; s: number }> = [];
  let batch: { files: string[]; s: number } | undefined;
  for (const x of sized) {
    if (x.s >= SHORT) {
      groups.push({ files: [x.f], s: x.s });
      continue;
    }
    if (!batch || batch.s + x.s > BATCH) groups.push((batch = { files: [], s: 0 }));
    batch.files.push(x.f);
    batch.s += x.s;
  }
  return groups.map((g) => ({
    name: `${store}: ${g.files.length === 1 ? g.files[0]! : `${g.files.length} files (${g.files.map((f) => path.basename(f, '.test.ts')).join(', ')})`}`,
    cmd: process.execPath,
    // mocha's own cli with .mocharc.cjs's node options given here: bin/mocha.js would start a second node for them
    args: [...NODE_OPTIONS, path.join(REPO_ROOT, 'node_modules/mocha/lib/cli/cli.js'), ...g.files],
    env: store === 'postgres' ? { RUNPLANE_TEST_STORE: 'postgres' } : ({} as Record<string, string>),
    expect: g.s,
    files: g.files.map((f) => keyOf(f, store)),
    store,
    heavy: g.files.some((f) => SUITE.HEAVY.includes(f)),
  }));
}

function checkJobs(): Job[] {
  const bin = (name: string) => path.join(REPO_ROOT, 'node_modules/.bin', name);
  return [
    { name: 'typecheck', cmd: bin('tsc'), args: ['--noEmit', '-p', 'tsconfig.json'], env: {}, expect: 60, files: [] },
    { name: 'lint', cmd: bin('eslint'), args: ['.'], env: {}, expect: 60, files: [] },
  ];
}

/** A database with the gateway's migrations applied, once: each test database is a copy of it. */
async function migratedTemplate(url: string): Promise<string> {
  const name = 'runplane_migrated';
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  await (await openPool(url.replace(/\/postgres$/, `/${name}`))).end();
  return name;
}

const running = new Set<ChildProcess>();
let stopping = false;
// the throwaway cluster of the PostgreSQL files: stopped however the run ends (see the end of this file)
let cluster: PgHandle | undefined;

function runJob(job: Job, timesDir: string, extraEnv: Record<string, string>): Promise<Outcome> {
  const t0 = performance.now();
  const timesFile = path.join(timesDir, `${Math.random().toString(36).slice(2)}.json`);
  return new Promise((resolve) => {
    // --pdeathsig: a job ends with this process however it ends (SIGKILL included), never running on unseen
    const child = spawn('setpriv', ['--pdeathsig', 'TERM', '--', job.cmd, ...job.args], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...extraEnv, ...job.env, ...(job.files.length ? { RUNPLANE_TEST_TIMES: timesFile } : {}) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    running.add(child);
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const limit = setTimeout(() => {
      out += `\n[scripts/test] killed after ${JOB_LIMIT_MS / 60_000} minutes\n`;
      child.kill('SIGKILL');
    }, JOB_LIMIT_MS);
    child.once('close', (code) => {
      clearTimeout(limit);
      running.delete(child);
      let times: Outcome['times'];
      try {
        times = JSON.parse(readFileSync(timesFile, 'utf8')) as Outcome['times'];
      } catch {
        times = undefined;
      }
      resolve({ job, code, seconds: (performance.now() - t0) / 1000, out, times });
    });
  });
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { jobs: { type: 'string' }, store: { type: 'string' }, 'no-checks': { type: 'boolean' } },
  });
  const width = Number(values.jobs ?? process.env.RUNPLANE_TEST_JOBS ?? Math.max(2, cpus().length));
  // one job beyond the lanes while the host's CPU sits idle (scripts/test-pool.ts); RUNPLANE_TEST_EXTRA=0: never
  const extra = Number(process.env.RUNPLANE_TEST_EXTRA ?? 1);
  const stores: Store[] = values.store === 'sqlite' ? ['sqlite'] : values.store === 'postgres' ? ['postgres'] : ['sqlite', 'postgres'];
  const t0 = performance.now();
  const built = await build({ quiet: true });
  process.stdout.write(`build: ${built.built ? `${(built.ms / 1000).toFixed(1)} s` : 'fresh'}\n`);

  const jobs = [...(values['no-checks'] || positionals.length > 0 ? [] : checkJobs()), ...stores.flatMap((s) => mochaJobs(s, filesOf(s, positionals, stores.length === 1)))].sort((a, b) => b.expect - a.expect);
  const extraEnv: Record<string, string> = {};
  const timesDir = mkdtempSync(path.join(tmpdir(), 'rp-times-'));
  try {
    if (jobs.some((j) => j.store === 'postgres')) {
      cluster = await startPostgres();
      extraEnv.RUNPLANE_TEST_PG_URL = cluster.url;
      extraEnv.RUNPLANE_TEST_PG_TEMPLATE = await migratedTemplate(cluster.url);
    }
    return await runPool(jobs, width, extra, timesDir, extraEnv, t0);
  } finally {
    await cluster?.stop();
    cluster = undefined;
    rmSync(timesDir, { recursive: true, force: true });
  }
}

async function runPool(jobs: Job[], width: number, extra: number, timesDir: string, extraEnv: Record<string, string>, t0: number): Promise<number> {
  process.stdout.write(`${jobs.length} jobs, ${width} at a time${extra > 0 ? ` (${width + extra} while the host's CPU is idle)` : ''}\n`);

  const outcomes: Outcome[] = [];
  const queue = [...jobs];
  const active = new Set<Promise<void>>();
  let running = 0;
  let heavyRunning = false;
  let extraStarts = 0;
  let lastExtra = -Infinity;
  let wake: (() => void) | undefined;
  // the host's idle share, the lower of the last two 5-second readings
  const meter = new IdleMeter();
  meter.sample();
  const readings: number[] = [];
  const sampler = setInterval(() => {
    const r = meter.sample();
    if (r !== undefined) readings.splice(0, readings.length, ...readings.slice(-1), r);
    wake?.();
  }, 5000);
  const start = (job: Job): void => {
    running += 1;
    if (job.heavy) heavyRunning = true;
    const p = runJob(job, timesDir, extraEnv).then((o) => {
      running -= 1;
      if (job.heavy) heavyRunning = false;
      outcomes.push(o);
      const t = o.times;
      const verdict = o.code === 0 ? 'ok' : `FAILED (exit ${o.code})`;
      process.stdout.write(`\n━━ ${job.name}: ${verdict}, ${o.seconds.toFixed(1)} s${t ? `, ${t.passes} passed, ${t.failures} failed` : ''} [${outcomes.length}/${jobs.length}, ${((performance.now() - t0) / 60_000).toFixed(1)} min]\n`);
      process.stdout.write(o.out.endsWith('\n') ? o.out : `${o.out}\n`);
      active.delete(p);
      wake?.();
    });
    active.add(p);
  };
  try {
    // a signal is ending the run: no new job
    while (queue.length > 0 && !stopping) {
      for (;;) {
        const idle = readings.length === 2 ? Math.min(...readings) : undefined;
        const p = pick(queue, width, extra, { running, heavyRunning, idle, sinceExtra: performance.now() - lastExtra });
        if (!p) break;
        if (p.extra) {
          lastExtra = performance.now();
          extraStarts += 1;
          // what the new job costs is not in the readings yet
          readings.length = 0;
        }
        start(queue.splice(p.at, 1)[0]!);
      }
      if (queue.length > 0) await new Promise<void>((r) => (wake = r));
    }
    while (active.size > 0) await Promise.race(active);
  } finally {
    clearInterval(sampler);
  }
  const seconds: Record<string, number> = {};
  const cpu: Record<string, number> = {};
  let passes = 0;
  let failures = 0;
  for (const o of outcomes) {
    if (!o.times) continue;
    passes += o.times.passes;
    failures += o.times.failures;
    for (const [f, s] of Object.entries(o.times.seconds)) seconds[keyOf(f, o.job.store ?? 'sqlite')] = s;
    for (const [f, c] of Object.entries(o.times.cpu ?? {})) cpu[keyOf(f, o.job.store ?? 'sqlite')] = c;
  }
  const failed = outcomes.filter((o) => o.code !== 0);
  process.stdout.write(`\n${slowestTable(seconds, 15, cpu)}`);
  const totalCpu = Object.values(cpu).reduce((a, b) => a + b, 0);
  if (totalCpu > 0) process.stdout.write(`test files' CPU: ${(totalCpu / 60).toFixed(1)} CPU-min\n`);
  if (process.env.RUNPLANE_TEST_CPU_OUT) writeFileSync(process.env.RUNPLANE_TEST_CPU_OUT, `${JSON.stringify(cpu, null, 1)}\n`);
  // the seconds of this run, for test/support/file-seconds.json
  if (process.env.RUNPLANE_TEST_SECONDS_OUT) writeFileSync(process.env.RUNPLANE_TEST_SECONDS_OUT, `${JSON.stringify(seconds, null, 1)}\n`);
  if (failed.length) process.stdout.write(`\nfailed jobs:\n${failed.map((o) => `  ${o.job.name} (exit ${o.code})\n${failureRecap(o.out)}`).join('\n')}\n`);
  process.stdout.write(`\nwall ${((performance.now() - t0) / 60_000).toFixed(1)} min, ${jobs.length} jobs, ${width} at a time${extra > 0 ? ` and ${extraStarts} in the extra lane` : ''}\n`);
  process.stdout.write(`tests: ${passes} passed, ${failures} failed\n`);
  return failed.length > 0 || failures > 0 ? 1 : 0;
}

/**
 * A failed job's failures again at the very end (mocha's "N failing" section, capped), because CI keeps only the
 * tail of the output and a failure printed 20 minutes earlier was lost with the rest.
 */
function failureRecap(out: string, cap = 6000): string {
  const at = out.search(/^\s*\d+ failing/m);
  const text = at >= 0 ? out.slice(at) : out.slice(-cap);
  const cut = text.length > cap ? `${text.slice(0, cap)}\n    [... ${text.length - cap} more characters]` : text;
  return cut.replace(/^/gm, '    ');
}

// A signal ends the jobs, then the cluster, then this process (128 + the signal's number, as a shell reports
// it). Without that, the cluster outlived the run: a SIGHUP (a closed terminal) ran no handler at all. What no
// handler sees (SIGKILL) the cluster's watchdog (test/support/postgres.ts) and the jobs' --pdeathsig cover.
async function stopAll(sig: NodeJS.Signals): Promise<void> {
  if (stopping) return;
  stopping = true;
  const closed = [...running].map((c) => new Promise<void>((r) => (c.exitCode !== null || c.signalCode !== null ? r() : c.once('close', () => r()))));
  for (const c of running) c.kill(sig);
  const late = setTimeout(() => running.forEach((c) => c.kill('SIGKILL')), 10_000);
  await Promise.all(closed);
  clearTimeout(late);
  await cluster?.stop().catch(() => undefined);
  process.exit(128 + osConstants.signals[sig]);
}
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, () => void stopAll(sig));
process.exitCode = await main();
