// recoverStagedBundle: a staging directory a killed process left (the session
// never reached the rename of its close) is committed with what it holds, marked
// recovered, with the status the caller gives; hostile contents are dropped and
// never followed.
import { expect } from 'chai';
import { lstat, mkdir, readFile, readdir, rename, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { DebugSession, ValueError, recoverStagedBundle, stagedBundles, validateBundle } from '../../sdk/index.ts';
import { filesUnder, png, tempDir } from '../support/trace.ts';

const readJson = async (file: string) => JSON.parse(await readFile(file, 'utf8'));
const until = async (cond: () => Promise<boolean>) => {
  for (let i = 0; i < 200 && !(await cond()); i++) await new Promise((r) => setTimeout(r, 10));
};
const refusal = (p: Promise<unknown>): Promise<unknown> => p.then(() => undefined, (err: unknown) => err);
const step = (i: number) => ({ step_index: i, status: 'passed' as const, action: { type: 'CLICK', params: { x: i, y: i } }, started_at: new Date().toISOString(), ended_at: new Date().toISOString() });
const opts = { runId: 'run-1', status: 'failed' as const, reason: 'the process died before the close', clientName: 'test-client' };

/** A session that recorded steps and screenshots and was never closed: what a SIGKILL leaves. */
async function abandoned(outDir: string, steps = 2): Promise<string> {
  const s = new DebugSession({ runId: 'run-1', clientName: 'test-client', outDir, captureMode: 'screenshots', dsn: null, env: {} });
  for (let i = 0; i < steps; i++) {
    s.recordStep(step(i));
    await s.attachObservation(i, 'post', await png(i));
  }
  await until(async () => (await stagedBundles(outDir)).length === 1 && (await filesUnder((await stagedBundles(outDir))[0]!).catch(() => [])).length === steps);
  const [dir] = await stagedBundles(outDir);
  return dir!;
}

describe('trace SDK: recovering a staged bundle', () => {
  it('commits what a killed session staged, with the given status, the given steps and a recovery mark', async () => {
    const outDir = path.join(await tempDir('recover-'), 'trace');
    const staged = await abandoned(outDir);
    expect(await filesUnder(staged)).to.have.members(['screenshots/0000_post.png', 'screenshots/0001_post.png']);
    const r = await recoverStagedBundle(staged, outDir, { ...opts, steps: [step(0), { ...step(1), status: 'failed' }] });
    expect(r.reused).to.equal(false);
    expect(r.dropped).to.deep.equal([]);
    expect(await stagedBundles(outDir)).to.deep.equal([]);
    expect(await validateBundle(outDir)).to.deep.equal([]);
    const m = await readJson(path.join(outDir, 'manifest.json'));
    expect(m.status).to.equal('failed');
    expect(m.step_count).to.equal(2);
    expect(m.recovery).to.include({ complete: false, reason: opts.reason });
    expect(m.paths).to.include.members(['screenshots/0000_post.png', 'steps/0001.json', 'trace.json']);
    const s1 = await readJson(path.join(outDir, 'steps', '0001.json'));
    expect(s1.status).to.equal('failed');
    expect(s1.observation.post).to.equal('screenshots/0001_post.png');
    expect((await readJson(path.join(outDir, 'trace.json'))).session.status).to.equal('failed');
    const events = (await readFile(path.join(outDir, 'events', 'run.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
    expect(events.at(-1)).to.include({ layer: 'recovery', kind: 'note', summary: opts.reason });
  });

  it('commits a whole staged bundle as it is when its status agrees, and rebuilds it, keeping its step records, when not', async () => {
    const base = await tempDir('recover-whole-');
    const outDir = path.join(base, 'trace');
    const s = new DebugSession({ runId: 'run-1', clientName: 'test-client', outDir, captureMode: 'screenshots', dsn: null, env: {} });
    s.recordStep({ ...step(0), step_id: 'step_keepme' });
    await s.attachObservation(0, 'post', await png(3));
    await s.close('passed');
    const bytes = await readFile(path.join(outDir, 'manifest.json'));
    // the close wrote everything and was killed before its rename
    await rename(outDir, path.join(base, '.trace.partial-0123456789ab'));
    expect((await recoverStagedBundle(path.join(base, '.trace.partial-0123456789ab'), outDir, { ...opts, status: 'passed' })).reused).to.equal(true);
    expect((await readFile(path.join(outDir, 'manifest.json'))).equals(bytes)).to.equal(true);

    await rename(outDir, path.join(base, '.trace.partial-0123456789ac'));
    const r = await recoverStagedBundle(path.join(base, '.trace.partial-0123456789ac'), outDir, { ...opts, steps: [{ ...step(0), status: 'failed' }] });
    expect(r.reused).to.equal(false);
    expect(await validateBundle(outDir)).to.deep.equal([]);
    expect((await readJson(path.join(outDir, 'manifest.json'))).status).to.equal('failed');
    // the session's own step record wins over the caller's at its index
    expect(await readJson(path.join(outDir, 'steps', '0000.json'))).to.include({ step_id: 'step_keepme', status: 'passed' });
  });

  it('finishes a rebuild cut at any point: cut files are dropped, a second call commits what the first left', async () => {
    const base = await tempDir('recover-cut-');
    const outDir = path.join(base, 'trace');
    const staged = await abandoned(outDir);
    const whole = await readFile(path.join(staged, 'screenshots', '0001_post.png'));
    await writeFile(path.join(staged, 'screenshots', '0001_post.png'), whole.subarray(0, whole.length - 20));
    await mkdir(path.join(staged, 'steps'));
    await writeFile(path.join(staged, 'steps', '0000.json'), '{"step_index": 0, "step_');
    await writeFile(path.join(staged, 'trace.json'), '{"sess');
    await writeFile(path.join(staged, 'manifest.json'), '{"run_id":');
    const r = await recoverStagedBundle(staged, outDir, { ...opts, steps: [step(0), step(1)] });
    expect(r.dropped.map((d) => d.split(':')[0]).sort()).to.deep.equal(['screenshots/0001_post.png', 'steps/0000.json']);
    expect(await validateBundle(outDir)).to.deep.equal([]);
    expect((await readJson(path.join(outDir, 'steps', '0001.json'))).observation).to.equal(undefined);
    // killed after the rebuilt manifest was written, before the rename: the next call commits it as it is
    await rename(outDir, path.join(base, '.trace.partial-00000000000f'));
    const again = await recoverStagedBundle(path.join(base, '.trace.partial-00000000000f'), outDir, { ...opts, steps: [step(0), step(1)] });
    expect(again.reused).to.equal(true);
    expect(await stagedBundles(outDir)).to.deep.equal([]);
  });

  it('removes links and odd names without following them, and refuses a staged path that is not a staging directory of the bundle', async () => {
    const base = await tempDir('recover-hostile-');
    const outside = await tempDir('recover-outside-');
    await writeFile(path.join(outside, 'secret.txt'), 'keep me');
    const outDir = path.join(base, 'trace');
    const staged = await abandoned(outDir, 1);
    await symlink(path.join(outside, 'secret.txt'), path.join(staged, 'screenshots', '0005_post.png'));
    await symlink(outside, path.join(staged, 'modelio'));
    await symlink(path.join(outside, 'secret.txt'), path.join(staged, 'manifest.json'));
    await writeFile(path.join(staged, 'screenshots', 'evil\n.png'), 'x');
    await writeFile(path.join(staged, '..%2f..%2fescape.json'), '{}');
    const r = await recoverStagedBundle(staged, outDir, { ...opts, steps: [step(0)] });
    expect(r.dropped.map((d) => d.split(':')[0]).sort()).to.deep.equal(['..%2f..%2fescape.json', 'manifest.json', 'modelio', 'screenshots/0005_post.png', 'screenshots/evil\n.png']);
    expect(await readFile(path.join(outside, 'secret.txt'), 'utf8')).to.equal('keep me');
    expect(await readdir(outside)).to.deep.equal(['secret.txt']);
    expect(await validateBundle(outDir)).to.deep.equal([]);
    for (const f of await filesUnder(outDir)) expect((await lstat(path.join(outDir, f))).isFile(), f).to.equal(true);

    // a link named like a staging directory is not one; neither is a directory beside another bundle
    await symlink(outside, path.join(base, '.trace.partial-aaaaaaaaaaaa'));
    expect(await stagedBundles(outDir)).to.deep.equal([]);
    expect(await refusal(recoverStagedBundle(path.join(base, '.trace.partial-aaaaaaaaaaaa'), outDir, opts))).to.be.instanceOf(ValueError);
    await mkdir(path.join(base, '.other.partial-bbbbbbbbbbbb'));
    expect(await refusal(recoverStagedBundle(path.join(base, '.other.partial-bbbbbbbbbbbb'), outDir, opts))).to.be.instanceOf(ValueError);
    expect(await refusal(recoverStagedBundle(path.join(outside, '.trace.partial-cccccccccccc'), outDir, opts))).to.be.instanceOf(ValueError);
    await mkdir(path.join(base, '.trace.partial-dddddddddddd'));
    expect(await refusal(recoverStagedBundle(path.join(base, '.trace.partial-dddddddddddd'), outDir, { ...opts, runId: '../x' }))).to.be.instanceOf(ValueError);
    expect((await stat(path.join(outside, 'secret.txt'))).isFile()).to.equal(true);
  });
});
