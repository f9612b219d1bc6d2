import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { DebugSession, ObjectStore, validateBundle } from '../../sdk/index.ts';
import { startFakeS3 } from '../support/s3.ts';
import { startIngest } from '../support/ingest.ts';
import { collectingLogger, png, tempDir } from '../support/trace.ts';
import { builtPath } from '../../shared/build.mjs';

const root = path.resolve(import.meta.dirname, '../..');

describe('trace SDK stores and atomic close', () => {
  it('a process killed mid-close leaves no half bundle at the final path', async function () {
    this.timeout(60_000);
    const dir = await tempDir();
    const out = path.join(dir, 'bundle');
    const child = spawn(process.execPath, [builtPath('test/trace/fixtures/close-child.ts'), out, '400'], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        if (d.toString().includes('closing')) {
          child.kill('SIGKILL');
          resolve();
        }
      });
      child.on('exit', () => resolve());
      child.on('error', reject);
    });
    await new Promise((r) => child.once('exit', r).once('close', r));
    const entries = await readdir(dir);
    const finalExists = await stat(out).then(() => true, () => false);
    if (finalExists) {
      // the rename won the race: then the bundle is whole
      expect(await validateBundle(out)).to.deep.equal([]);
    } else {
      expect(entries.some((e) => e.startsWith('.bundle.partial-')), entries.join()).to.equal(true);
    }
    expect(entries.filter((e) => e === 'bundle' || e.startsWith('.bundle.partial-')).length).to.be.greaterThan(0);
  });

  it('the object store writes a whole bundle to an S3-compatible bucket (signed), lists, reads and presigns', async () => {
    const s3 = await startFakeS3('AKIDTEST');
    try {
      const store = new ObjectStore({ endpoint: s3.url, bucket: 'traces', prefix: 'runs/r-obj', accessKeyId: 'AKIDTEST', secretAccessKey: 'secret' });
      const s = new DebugSession({ runId: 'r-obj', clientName: 'c', outDir: path.join(await tempDir(), 'unused'), store, dsn: null });
      s.recordStep({ step_index: 0, step_id: 'a', status: 'passed' });
      const image = await png(4);
      await s.attachObservation(0, 'post', image);
      const m = await s.close();
      expect(store.rootUri).to.equal('s3://traces/runs/r-obj');
      expect(s3.requests[s3.requests.length - 1]).to.equal('PUT traces/runs/r-obj/manifest.json');
      expect(await validateBundle(store)).to.deep.equal([]);
      expect((await store.list()).length).to.equal(m.paths!.length + 1);
      expect((await store.readBytes('screenshots/0000_post.png')).equals(image)).to.equal(true);
      expect(await store.exists('nope.json')).to.equal(false);
      const signed = await store.signedUrl('screenshots/0000_post.png', 60);
      const res = await fetch(signed);
      expect(res.status).to.equal(200);
      expect(Buffer.from(await res.arrayBuffer()).equals(image)).to.equal(true);
      const wrong = new ObjectStore({ endpoint: s3.url, bucket: 'traces', accessKeyId: 'OTHER', secretAccessKey: 'x' });
      let err: unknown;
      try {
        await wrong.readText('runs/r-obj/manifest.json');
      } catch (e) {
        err = e;
      }
      expect(String(err)).to.match(/403/);
    } finally {
      await s3.close();
    }
  });

  it('the ingest service can keep bundles in the object store; reads stay byte-identical', async () => {
    const s3 = await startFakeS3('AKIDING');
    const ing = await startIngest({ objectStore: new ObjectStore({ endpoint: s3.url, bucket: 'ingest', prefix: 'bundles', accessKeyId: 'AKIDING', secretAccessKey: 's' }) });
    try {
      const t = await ing.tenant('objt');
      const dir = path.join(await tempDir(), 'b');
      const s = new DebugSession({ runId: 'obj-run', clientName: 'c', outDir: dir, dsn: t.dsn, logger: collectingLogger() });
      s.recordStep({ step_index: 0, step_id: 'a', status: 'passed' });
      const image = await png(8);
      await s.attachObservation(0, 'pre', image);
      await s.close();
      // screenshots are accepted (202) before they are stored; a read waits for the run's queued writes
      const cookie = await ing.login(t);
      const res = await ing.get('/runs/obj-run/screenshots/0000_pre.png', cookie);
      expect(Buffer.from(await res.arrayBuffer()).equals(image)).to.equal(true);
      expect([...s3.objects.keys()]).to.include('ingest/bundles/objt/obj-run/screenshots/0000_pre.png');
    } finally {
      await ing.close();
      await s3.close();
    }
  });
});
