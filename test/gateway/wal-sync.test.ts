// The embedded store's commits sync the write-ahead log off the event loop
// (issue 15): a run's write is answered only after an fdatasync of the log that
// began after its commit; commits made while one runs share the next; a failed
// fsync fails the writes it was to cover; the event loop is not held meanwhile.
import { expect } from 'chai';
import { mkdtemp, readlink } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDb, type Db } from '../../gateway/state/sqlite/db.ts';
import { Committer } from '../../gateway/state/sqlite/group-commit.ts';
import { WalSync } from '../../gateway/state/sqlite/wal-sync.ts';
import { SqliteEventTable } from '../../gateway/state/sqlite/tables.ts';
import { spawn } from 'node:child_process';
import { builtPath } from '../../shared/build.mjs';

/** An fdatasync that waits until the test lets it go, and notes which file it was asked to sync. */
function heldSync() {
  const files: string[] = [];
  const waiting: Array<{ go: () => void; fail: (e: Error) => void }> = [];
  const datasync = async (h: FileHandle): Promise<void> => {
    files.push(await readlink(`/proc/self/fd/${h.fd}`));
    await new Promise<void>((go, fail) => waiting.push({ go, fail }));
    await h.datasync();
  };
  return { files, waiting, datasync };
}

const turn = () => new Promise((r) => setImmediate(r));
const settled = async (p: Promise<unknown>): Promise<boolean> => {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  await turn();
  await turn();
  return done;
};

describe('SQLite commits sync the write-ahead log off the event loop', () => {
  let db: Db;
  let file: string;
  beforeEach(async () => {
    file = path.join(await mkdtemp(path.join(tmpdir(), 'runplane-wal-')), 'runplane.db');
    db = openDb(file);
    db.exec('CREATE TABLE w (n INTEGER)');
  });
  afterEach(() => {
    if (db.open) db.close();
  });

  it('answers a write only after an fdatasync of the log, and the commit itself runs unsynced', async () => {
    const h = heldSync();
    const c = new Committer(db, new WalSync(`${file}-wal`, h.datasync));
    const levels: number[] = [];
    const write = c.run(() => {
      levels.push(db.pragma('synchronous', { simple: true }) as number);
      return db.prepare('INSERT INTO w VALUES (1)').run().changes;
    });
    while (h.waiting.length === 0) await turn();
    // committed (another connection sees it) but not yet answered
    const other = openDb(file);
    try {
      expect((other.prepare('SELECT COUNT(*) AS n FROM w').get() as { n: number }).n).to.equal(1);
    } finally {
      other.close();
    }
    expect(await settled(write), 'answered before the log was synced').to.equal(false);
    expect(h.files).to.deep.equal([`${file}-wal`]);
    expect(levels, 'the batch commits at synchronous NORMAL').to.deep.equal([1]);
    expect(db.pragma('synchronous', { simple: true }), 'the connection stays FULL for other writers').to.equal(2);
    h.waiting.shift()!.go();
    expect(await write).to.equal(1);
  });

  it('shares one fsync among the commits made while another runs', async () => {
    const h = heldSync();
    const sync = new WalSync(`${file}-wal`, h.datasync);
    const c = new Committer(db, sync);
    const insert = db.prepare('INSERT INTO w VALUES (?)');
    const first = c.run(() => insert.run(0));
    while (h.waiting.length === 0) await turn();
    // three more commits in three turns while the first fsync is held
    const later: Array<Promise<unknown>> = [];
    for (let i = 1; i <= 3; i++) {
      later.push(c.run(() => insert.run(i)));
      await turn();
    }
    expect(c.commits).to.equal(4);
    expect(sync.syncs, 'no fsync starts while one runs').to.equal(1);
    expect(await settled(Promise.race(later))).to.equal(false);
    h.waiting.shift()!.go();
    await first;
    // the queued fsync starts only now, after the first ended: it covers all three
    while (h.waiting.length === 0) await turn();
    expect(await settled(Promise.race(later)), 'not answered before their own fsync').to.equal(false);
    h.waiting.shift()!.go();
    await Promise.all(later);
    expect(sync.syncs, 'one more fsync for the three').to.equal(2);
  });

  it('fails the writes a failed fsync was to cover, and the next write syncs again', async () => {
    const h = heldSync();
    const c = new Committer(db, new WalSync(`${file}-wal`, h.datasync));
    const insert = db.prepare('INSERT INTO w VALUES (?)');
    const lost = c.run(() => insert.run(1));
    while (h.waiting.length === 0) await turn();
    h.waiting.shift()!.fail(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
    let err: unknown;
    await lost.catch((e: unknown) => (err = e));
    expect(String(err)).to.match(/EIO/);
    const next = c.run(() => insert.run(2));
    while (h.waiting.length === 0) await turn();
    h.waiting.shift()!.go();
    expect((await next).changes).to.equal(1);
  });

  it('keeps the event loop free while the log is being synced', async () => {
    const h = heldSync();
    const c = new Committer(db, new WalSync(`${file}-wal`, h.datasync));
    const write = c.run(() => db.prepare('INSERT INTO w VALUES (1)').run());
    while (h.waiting.length === 0) await turn();
    // the sync is held: timers still fire, and a read answers at once
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, 20));
    expect(performance.now() - t0).to.be.below(1000);
    expect((db.prepare('SELECT COUNT(*) AS n FROM w').get() as { n: number }).n).to.equal(1);
    expect(await settled(write)).to.equal(false);
    h.waiting.shift()!.go();
    await write;
  });

  it('keeps every write a SIGKILLed process was answered for (the frames written before the fsync survive the process)', async function () {
    this.timeout(60_000);
    db.close();
    const child = spawn(process.execPath, [builtPath(path.join(import.meta.dirname, '../support/commit-child.ts')), file], { stdio: ['ignore', 'pipe', 'inherit'] });
    let answered = 0;
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const lines = out.split('\n');
      out = lines.pop()!;
      for (const l of lines) answered = Math.max(answered, Number(l));
    });
    // killed mid-stream, once it has been answered a few hundred times
    while (answered < 300) await new Promise((r) => setTimeout(r, 20));
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(child.signalCode).to.equal('SIGKILL');
    db = openDb(file);
    const kept = await new SqliteEventTable(db, 100_000).after<{ n: number }>('run-kill', 0);
    expect(kept.length, 'every answered append is there').to.be.at.least(answered);
    expect(kept.map((e) => e.seq), 'dense, nothing half-written').to.deep.equal(Array.from({ length: kept.length }, (_, i) => i + 1));
  });
});
