// The gateway's start-up sweep of trace bundles a killed process staged and
// never committed (gateway/trace/staged.ts), against hostile data dirs: staging
// dirs with names that are not the SDK's, a note naming another tenant's run, a
// symbolic link inside a staged bundle or in place of one, notes with unsafe ids.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { lstat, mkdir, readFile, readdir, symlink, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { pino } from 'pino';
import { SdkRunRecorder } from '../../gateway/trace/recorder.ts';
import { traceDir } from '../../gateway/trace/trace-fields.ts';
import type { RunRecord } from '../../gateway/runs/records.ts';
import { runnerOwner } from '../../gateway/runs/owners.ts';
import { stagedBundles, validateBundle } from '../../sdk/index.ts';
import { filesUnder, png, tempDir } from '../support/trace.ts';

const log = pino({ level: 'silent' });
const exists = (p: string) => lstat(p).then(() => true, () => false);
const noteName = (tenant: string, run: string) => `${createHash('sha256').update(`${tenant}\0${run}`).digest('hex').slice(0, 32)}.json`;

function record(tenant: string, id: string, status: string): RunRecord {
  const at = new Date(Date.now() - 1000).toISOString();
  const entry = (i: number) => ({ path: `steps[${i}]`, type: 'navigate', intent: `open page ${i}`, success: true, final_url: `http://site.test/${i}`, page_title: `Page ${i}`, attempts: 1 });
  return {
    run_id: id,
    tenant_id: tenant,
    status,
    halt_class: null,
    created_at: at,
    ended_at: status === 'running' ? null : new Date().toISOString(),
    cua_model: 'default-cua',
    runtime: { compute_backend: 'dom_plane' },
    steps: [entry(0), entry(1)],
  } as unknown as RunRecord;
}

/** An owner id of a process that has exited (its recordings can no longer commit). */
async function deadOwner(): Promise<string> {
  const child = spawn(process.execPath, ['-e', '']);
  await once(child, 'exit');
  return runnerOwner().replace(/:\d+:/, `:${child.pid}:`);
}

/** A recording that staged two steps' screenshots and whose process "died" before its close. */
async function stageRun(dataDir: string, run: RunRecord, owner: string): Promise<string> {
  const rec = (await new SdkRunRecorder({ dataDir, captureMode: 'screenshots', dsn: async () => undefined, log, version: 't', owner }).begin(run))!;
  const at = new Date().toISOString();
  for (let i = 0; i < 2; i++) {
    await rec.step({ index: i, path: `steps[${i}]`, type: 'navigate', intent: `open page ${i}`, success: true, final_url: '', page_title: '', attempts: 1, started_at: at, ended_at: at, cost_usd: 0 }, { pre: await png(i), post: await png(i + 1) });
  }
  const out = traceDir(dataDir, run);
  for (let i = 0; i < 200; i++) {
    const [dir] = await stagedBundles(out);
    if (dir && (await filesUnder(dir).catch(() => [])).length === 4) return dir;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('nothing was staged');
}

describe('gateway: staged trace bundles finished at the next start', () => {
  it('commits an ended run of a dead process under its own tenant only, and leaves hostile or foreign entries alone', async () => {
    const dataDir = await tempDir('staged-sweep-');
    const outside = await tempDir('staged-outside-');
    await writeFile(path.join(outside, 'secret.png'), 'not yours');
    const dead = await deadOwner();
    const alpha = record('alpha', 'run-a', 'succeeded');
    const running = record('alpha', 'run-live', 'running');
    const staged = await stageRun(dataDir, alpha, dead);
    await stageRun(dataDir, running, dead);
    // a link to a file and one to a directory outside, inside the staged bundle
    await symlink(path.join(outside, 'secret.png'), path.join(staged, 'screenshots', '0007_post.png'));
    await symlink(outside, path.join(staged, 'events'));
    // names that are not the SDK's staging dirs, and a link named like one, beside alpha's bundle
    const runDirA = path.dirname(traceDir(dataDir, alpha));
    for (const n of ['.trace.partial-ZZZZZZZZZZZZ', '.trace.partial-0123456789ab.evil', '.trace.partial-0123456789a']) await mkdir(path.join(runDirA, n, 'screenshots'), { recursive: true });
    await symlink(outside, path.join(runDirA, '.trace.partial-aaaaaaaaaaaa'));

    // tenant beta: a staged dir in beta's tree under alpha's run id, noted as beta's run
    const betaRun = { ...alpha, tenant_id: 'beta' } as RunRecord;
    const betaStaged = await stageRun(dataDir, betaRun, dead);
    // notes that are not notes: unsafe ids under their own hash, and a run the store does not know
    const notes = path.join(dataDir, 'trace-staging');
    await writeFile(path.join(notes, noteName('..', '../../etc')), JSON.stringify({ tenant_id: '..', run_id: '../../etc', owner: dead }));
    await writeFile(path.join(notes, noteName('alpha', 'run-gone')), JSON.stringify({ tenant_id: 'alpha', run_id: 'run-gone', owner: dead }));
    const notesBefore = (await readdir(notes)).sort();
    expect(notesBefore).to.have.length(5);

    const store = new Map([alpha, running].map((r) => [r.run_id, r]));
    const next = new SdkRunRecorder({ dataDir, captureMode: 'screenshots', dsn: async () => undefined, log, version: 't' });
    await next.finishStagedAtStart(async (id) => store.get(id));

    // alpha's run: committed under alpha's run dir, its status from the record, its steps and screenshots
    const out = traceDir(dataDir, alpha);
    expect(await validateBundle(out)).to.deep.equal([]);
    const manifest = JSON.parse(await readFile(path.join(out, 'manifest.json'), 'utf8'));
    expect(manifest).to.include({ status: 'passed', run_id: 'run-a', step_count: 2 });
    expect(manifest.tags).to.include({ tenant_id: 'alpha' });
    expect(manifest.recovery.complete).to.equal(false);
    expect(manifest.paths).to.include.members(['screenshots/0000_pre.png', 'screenshots/0001_post.png', 'steps/0001.json']);
    expect(JSON.parse(await readFile(path.join(out, 'steps', '0001.json'), 'utf8'))).to.include({ intent: 'open page 1', final_url: 'http://site.test/1' });
    for (const f of await filesUnder(out)) expect((await lstat(path.join(out, f))).isFile(), f).to.equal(true);
    expect(await readdir(outside)).to.deep.equal(['secret.png']);
    expect(await readFile(path.join(outside, 'secret.png'), 'utf8')).to.equal('not yours');
    expect(await stagedBundles(out)).to.deep.equal([]);
    // what is not an SDK staging dir is not touched
    for (const n of ['.trace.partial-ZZZZZZZZZZZZ', '.trace.partial-0123456789ab.evil', '.trace.partial-0123456789a', '.trace.partial-aaaaaaaaaaaa']) expect(await exists(path.join(runDirA, n)), n).to.equal(true);

    // beta's tree: nothing committed there, its staged dir and note stay (the store's run-a is alpha's)
    expect(await exists(traceDir(dataDir, betaRun))).to.equal(false);
    expect(await exists(betaStaged)).to.equal(true);
    // the run still running: left for its runner or the run recovery
    expect(await stagedBundles(traceDir(dataDir, running))).to.have.length(1);
    expect(await exists(traceDir(dataDir, running))).to.equal(false);
    // only alpha's note went
    expect((await readdir(notes)).sort()).to.deep.equal(notesBefore.filter((n) => n !== noteName('alpha', 'run-a')));

    // a second sweep changes nothing
    const before = await readFile(path.join(out, 'manifest.json'));
    await new SdkRunRecorder({ dataDir, captureMode: 'screenshots', dsn: async () => undefined, log, version: 't' }).finishStagedAtStart(async (id) => store.get(id));
    expect((await readFile(path.join(out, 'manifest.json'))).equals(before)).to.equal(true);
  });

  it("leaves a live process's staged bundle to that process, and finishes it once the run record says it ended and its owner is gone", async () => {
    const dataDir = await tempDir('staged-live-');
    const owner = runnerOwner();
    const run = record('alpha', 'run-b', 'failed');
    await stageRun(dataDir, run, owner);
    const sameProcess = new SdkRunRecorder({ dataDir, captureMode: 'screenshots', dsn: async () => undefined, log, version: 't', owner });
    expect(await sameProcess.finishStaged(run, 'x')).to.equal(false);
    // another live process (this one, under another nonce) is not dead either
    expect(await new SdkRunRecorder({ dataDir, captureMode: 'screenshots', dsn: async () => undefined, log, version: 't' }).finishStaged(run, 'x')).to.equal(false);
    expect(await exists(traceDir(dataDir, run))).to.equal(false);

    const dead = await deadOwner();
    const other = record('alpha', 'run-c', 'failed');
    await stageRun(dataDir, { ...other, halt_class: 'runner_lost' } as RunRecord, dead);
    expect(await sameProcess.finishStaged({ ...other, halt_class: 'runner_lost' } as RunRecord, 'run recovered: its runner went away')).to.equal(true);
    const m = JSON.parse(await readFile(path.join(traceDir(dataDir, other), 'manifest.json'), 'utf8'));
    expect(m.status).to.equal('halted');
    const events = (await readFile(path.join(traceDir(dataDir, other), 'events', 'run.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
    expect(events.at(-1)).to.include({ layer: 'recovery', summary: 'run recovered: its runner went away' });
  });
});
