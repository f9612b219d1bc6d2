// The SQLite store of record's tables, on real files: paging, event seq across
// two connections, claims and leases with expiry, exact slots, the outbox lease.
import { expect } from 'chai';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDb, type Db } from '../../gateway/state/sqlite/db.ts';
import { SqliteEventTable, SqliteKeyedStore, SqliteRunTable } from '../../gateway/state/sqlite/tables.ts';
import { SqliteAtomicOps } from '../../gateway/state/sqlite/atomic.ts';
import { GroupCommit } from '../../gateway/state/sqlite/group-commit.ts';
import { SqliteOutbox } from '../../gateway/state/outbox.ts';
import { BadCursor, pageOf, type RunKey } from '../../gateway/state/tables.ts';
import { newToken, sleep, startGateway, step, until, type TestGateway } from '../support/gateway.ts';
import { RunRecovery } from '../../gateway/runs/recovery.ts';
import { ownerIsDead, runnerKey, runnerOwner } from '../../gateway/runs/owners.ts';
import { spawnSync } from 'node:child_process';

describe('store of record on SQLite', () => {
  let file: string;
  let db: Db;
  const opened: Db[] = [];
  const open = () => {
    const d = openDb(file);
    opened.push(d);
    return d;
  };

  beforeEach(async () => {
    file = path.join(await mkdtemp(path.join(tmpdir(), 'runplane-sql-')), 'runplane.db');
    db = open();
  });
  afterEach(() => {
    for (const d of opened.splice(0)) if (d.open) d.close();
  });

  it('applies each migration once, also when a second process opens the same file', () => {
    const again = open();
    const rows = again.prepare('SELECT version, name FROM schema_migrations ORDER BY version').all() as Array<{ version: number; name: string }>;
    expect(rows.map((r) => r.version)).to.deep.equal([1, 2, 3, 4]);
    expect(db.pragma('journal_mode', { simple: true })).to.equal('wal');
  });

  it('pages a tenant runs newest first with an opaque cursor, filters by status, and refuses a forged cursor', async () => {
    const runs = new SqliteRunTable<RunKey & { n: number }>(db);
    const all: Array<RunKey & { n: number }> = [];
    for (let i = 0; i < 25; i++) {
      // pairs share a timestamp: run_id breaks the tie
      const r = { run_id: `run-${String(i).padStart(2, '0')}`, tenant_id: i % 5 === 4 ? 'beta' : 'alpha', status: i % 3 === 0 ? 'failed' : 'succeeded', created_at: new Date(Date.UTC(2026, 0, 1, 0, 0, Math.floor(i / 2))).toISOString(), n: i };
      all.push(r);
      await runs.put(r);
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await runs.page('alpha', { limit: 7, cursor });
      expect(page.items.length).to.be.at.most(7);
      seen.push(...page.items.map((r) => r.run_id));
      // the in-memory stores page the same way
      expect(pageOf(all, 'alpha', { limit: 7, cursor }).items.map((r) => r.run_id)).to.deep.equal(page.items.map((r) => r.run_id));
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    const expected = all.filter((r) => r.tenant_id === 'alpha').sort((a, b) => (a.created_at === b.created_at ? (a.run_id < b.run_id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1)).map((r) => r.run_id);
    expect(seen).to.deep.equal(expected);
    const failed = await runs.page('alpha', { limit: 100, status: 'failed' });
    expect(failed.items.every((r) => r.status === 'failed' && r.tenant_id === 'alpha')).to.equal(true);
    expect(failed.items.length).to.equal(all.filter((r) => r.tenant_id === 'alpha' && r.status === 'failed').length);
    for (const bad of ['x', Buffer.from('["a"]').toString('base64url'), 'A'.repeat(500), Buffer.from('{"$gt":1}').toString('base64url')]) {
      let err: unknown;
      await runs.page('alpha', { limit: 5, cursor: bad }).catch((e: unknown) => (err = e));
      expect(err, bad.slice(0, 20)).to.be.instanceOf(BadCursor);
    }
  });

  it('never overwrites a run that has ended', async () => {
    const runs = new SqliteRunTable<RunKey>(db);
    const r = { run_id: 'r1', tenant_id: 't', status: 'running', created_at: new Date().toISOString() };
    expect(await runs.putUnlessEnded(r)).to.equal(true);
    expect(await runs.putUnlessEnded({ ...r, status: 'failed' })).to.equal(true);
    expect(await runs.putUnlessEnded({ ...r, status: 'running' })).to.equal(false);
    expect((await runs.get('r1'))!.status).to.equal('failed');
    expect((await runs.unfinished()).length).to.equal(0);
  });

  it('fences a runner write by its lease: refused once another owner holds the lease, it expired, or the run ended', async () => {
    let now = Date.now();
    const ops = new SqliteAtomicOps(db, () => now);
    const runs = new SqliteRunTable<RunKey & { n: number }>(db);
    const r = { run_id: 'f1', tenant_id: 't', status: 'running', created_at: new Date().toISOString(), n: 0 };
    await runs.put(r);
    expect(await runs.putIfLeased({ ...r, n: 1 }, 'runner:f1', 'A'), 'no lease at all').to.equal(false);
    await ops.claim('runner:f1', 'A', 60_000);
    expect(await runs.putIfLeased({ ...r, n: 2 }, 'runner:f1', 'A')).to.equal(true);
    expect(await runs.putIfLeased({ ...r, n: 3 }, 'runner:f1', 'B'), "another runner's lease").to.equal(false);
    expect((await runs.get('f1'))!.n).to.equal(2);
    await ops.put('runner:f1', 'A', -1); // expired
    now += 1;
    expect(await runs.putIfLeased({ ...r, n: 4 }, 'runner:f1', 'A'), 'an expired lease').to.equal(false);
    await ops.put('runner:f1', 'A', 60_000);
    await runs.put({ ...r, status: 'failed', n: 5 });
    expect(await runs.putIfLeased({ ...r, n: 6 }, 'runner:f1', 'A'), 'an ended run').to.equal(false);
    expect((await runs.get('f1'))!).to.include({ status: 'failed', n: 5 });
  });

  it('keeps event seq dense and ordered when two connections append to one run', async () => {
    const a = new SqliteEventTable(db, 10_000);
    const b = new SqliteEventTable(open(), 10_000);
    await Promise.all(Array.from({ length: 200 }, (_, i) => (i % 3 === 0 ? b : a).append('run-x', { n: i })));
    const events = await a.after<{ n: number }>('run-x', 0);
    expect(events.map((e) => e.seq)).to.deep.equal(Array.from({ length: 200 }, (_, i) => i + 1));
    expect((await b.after('run-x', 195)).length).to.equal(5);
  });

  it('accepts a run with its first event in one commit, shared by the acceptances of one turn; a failing one rolls back alone', async () => {
    const events = new SqliteEventTable(db, 10_000);
    const runs = new SqliteRunTable<RunKey>(db);
    const reader = open();
    const committed = reader.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM runs');
    const run = (i: number) => ({ run_id: `acc-${i}`, tenant_id: 't', status: 'queued', created_at: new Date().toISOString() });
    const settled = await Promise.allSettled(
      Array.from({ length: 12 }, (_, i) => events.appendWithRun(i === 5 ? { ...run(i), created_at: null as unknown as string } : run(i), { type: 'run.status', i })),
    );
    expect(settled.map((r) => r.status)).to.deep.equal(Array.from({ length: 12 }, (_, i) => (i === 5 ? 'rejected' : 'fulfilled')));
    expect(settled.filter((r) => r.status === 'fulfilled').map((r) => (r as PromiseFulfilledResult<{ seq: number }>).value.seq)).to.deep.equal(Array(11).fill(1));
    expect(committed.get()!.n).to.equal(11);
    expect(await runs.get('acc-5'), 'the failed one left no row').to.equal(undefined);
    expect(await events.after('acc-5', 0), 'and no event').to.deep.equal([]);
    expect((await events.after<{ i: number }>('acc-7', 0)).map((e) => [e.seq, e.i])).to.deep.equal([[1, 7]]);
    // one commit for the turn: while the batch writes, another connection sees none of it
    const seen: number[] = [];
    const batch = new GroupCommit(db, (i: number) => {
      db.prepare('INSERT INTO runs (run_id, tenant_id, status, created_at, body) VALUES (?, ?, ?, ?, ?)').run(`g-${i}`, 't', 'queued', 'now', '{}');
      seen.push(committed.get()!.n);
      return i;
    });
    expect(await Promise.all([0, 1, 2, 3].map((i) => batch.run(i)))).to.deep.equal([0, 1, 2, 3]);
    expect(seen).to.deep.equal([11, 11, 11, 11]);
    expect(committed.get()!.n).to.equal(15);
    expect(db.pragma('synchronous', { simple: true }), 'FULL stays the connection setting').to.equal(2);
  });

  it('commits a slot taken at synchronous NORMAL (its sync rides on the run commit) and sets the connection back to FULL', async () => {
    const ops = new SqliteAtomicOps(db);
    expect(await ops.acquireSlot('tenant:s', 'run-1', 1)).to.equal(true);
    expect(await ops.acquireSlot('tenant:s', 'run-2', 1)).to.equal(false);
    expect(db.pragma('synchronous', { simple: true })).to.equal(2);
    expect(await new SqliteAtomicOps(open()).slotCount('tenant:s'), 'committed: another connection counts it').to.equal(1);
  });

  it('expires claims, renews a lease only for its holder, and counts slots exactly', async () => {
    let now = 1_000_000;
    const ops = new SqliteAtomicOps(db, () => now);
    expect(await ops.claim('runner:r', 'A', 1000)).to.equal(null);
    expect(await ops.claim('runner:r', 'B', 1000)).to.equal('A');
    expect(await ops.renew('runner:r', 'B', 1000)).to.equal(false);
    now += 900;
    expect(await ops.renew('runner:r', 'A', 1000)).to.equal(true);
    now += 900;
    expect(await ops.get('runner:r'), 'renewed: still held').to.equal('A');
    now += 200;
    expect(await ops.get('runner:r'), 'expired').to.equal(null);
    expect(await ops.renew('runner:r', 'A', 1000), 'an expired lease is not revived').to.equal(false);
    expect(await ops.claim('runner:r', 'B', 1000)).to.equal(null);
    expect(await ops.deleteIf('runner:r', 'A')).to.equal(false);
    expect(await ops.deleteIf('runner:r', 'B')).to.equal(true);
    const other = new SqliteAtomicOps(open(), () => now);
    const got = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? ops : other).acquireSlot('tenant:t', `run-${i}`, 3)));
    expect(got.filter(Boolean).length).to.equal(3);
    expect(await other.slotCount('tenant:t')).to.equal(3);
    expect(await ops.releaseSlot('tenant:t', 'run-0')).to.equal(true);
    expect(await other.releaseSlot('tenant:t', 'run-0')).to.equal(false);
  });

  it('keeps a count row per slot set that always equals the slots (taken, taken again, released, refused), from the slots a file had before', async () => {
    const ops = new SqliteAtomicOps(db);
    const exact = (key: string) => (db.prepare('SELECT COUNT(*) AS n FROM slots WHERE key = ?').get(key) as { n: number }).n;
    for (let i = 0; i < 5; i++) expect(await ops.acquireSlot('tenant:c', `run-${i}`, 4)).to.equal(i < 4);
    expect(await ops.acquireSlot('tenant:c', 'run-1', 4), 'a holder taking its slot again').to.equal(true);
    expect(await ops.slotCount('tenant:c')).to.equal(4);
    await ops.releaseSlot('tenant:c', 'run-2');
    await ops.releaseSlot('tenant:c', 'run-2');
    expect(await ops.slotCount('tenant:c')).to.equal(3);
    expect(await ops.acquireSlot('tenant:c', 'run-9', 4), 'a freed slot is free').to.equal(true);
    for (const h of ['run-0', 'run-1', 'run-3', 'run-9']) await ops.releaseSlot('tenant:c', h);
    expect(await ops.slotCount('tenant:c')).to.equal(0);
    expect(exact('tenant:c')).to.equal(0);
    // a file from before the count rows: its slots are counted when migration 002 applies
    db.exec("DROP TRIGGER slots_count_in; DROP TRIGGER slots_count_out; DROP TABLE slot_counts; DELETE FROM schema_migrations WHERE version = 2; INSERT INTO slots VALUES ('tenant:old', 'a'), ('tenant:old', 'b')");
    const reopened = new SqliteAtomicOps(open());
    expect(await reopened.slotCount('tenant:old')).to.equal(2);
    expect(await reopened.acquireSlot('tenant:old', 'c', 3)).to.equal(true);
    expect(await reopened.acquireSlot('tenant:old', 'd', 3)).to.equal(false);
    expect(await ops.slotCount('tenant:old')).to.equal(exact('tenant:old'));
  });

  it('keyed stores are per namespace and survive a reopen', async () => {
    const s = new SqliteKeyedStore<{ v: number }>(db, 'recipes:alpha');
    await s.set('b', { v: 2 });
    await s.set('a', { v: 1 });
    expect(await new SqliteKeyedStore(db, 'recipes:beta').keys()).to.deep.equal([]);
    db.close();
    const again = new SqliteKeyedStore<{ v: number }>(open(), 'recipes:alpha');
    expect(await again.keys()).to.deep.equal(['a', 'b']);
    expect(await again.get('b')).to.deep.equal({ v: 2 });
    expect(await again.delete('b')).to.equal(true);
    expect(await again.delete('b')).to.equal(false);
  });

  it('leases outbox items: a second sender takes nothing until the first one lease runs out', async () => {
    const one = new SqliteOutbox(db);
    const two = new SqliteOutbox(open());
    await one.add({ id: 'msg_1', run_id: 'r', target: '{}', payload: '{}', attempt: 1, due_at: 100 });
    expect((await one.take(100, 10, 50)).map((i) => i.id)).to.deep.equal(['msg_1']);
    expect(await two.take(120, 10, 50)).to.deep.equal([]);
    expect((await two.take(151, 10, 50)).map((i) => i.attempt)).to.deep.equal([1]);
    await two.reschedule('msg_1', 2, 500);
    expect(await one.nextDue()).to.equal(500);
    expect(await one.take(499, 10, 50)).to.deep.equal([]);
    expect((await one.take(500, 10, 50))[0]!.attempt).to.equal(2);
    await one.remove('msg_1');
    expect(await two.nextDue()).to.equal(undefined);
  });
});

describe('GET /v1/runs', () => {
  let gw: TestGateway;
  const alpha = newToken();
  const beta = newToken();
  const reader = newToken();

  before(async () => {
    gw = await startGateway({
      keys: {
        [alpha]: { tenant_id: 'alpha', rate_limit_per_minute: 0, max_concurrent_runs: 50 },
        [beta]: { tenant_id: 'beta', rate_limit_per_minute: 0 },
        [reader]: { tenant_id: 'alpha', scopes: ['result'] },
      },
    });
  });
  after(() => gw.close());

  it('lists the tenant runs newest first, a page at a time, and nothing of another tenant', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push((await gw.req('POST', '/v1/predict', { token: alpha, body: { plan: [step()] } })).body.run_id as string);
      await sleep(3); // created_at has millisecond resolution; run_id breaks ties in an order unrelated to submission
    }
    await gw.req('POST', '/v1/predict', { token: beta, body: { plan: [step()] } });
    const first = await gw.req('GET', '/v1/runs?limit=3&status=queued', { token: alpha });
    expect(first.status, first.text).to.equal(200);
    const second = await gw.req('GET', `/v1/runs?limit=3&status=queued&cursor=${first.body.next_cursor}`, { token: alpha });
    const listed = [...first.body.runs, ...second.body.runs].map((r: { run_id: string }) => r.run_id);
    expect(listed).to.deep.equal([...ids].reverse());
    expect(second.body.next_cursor).to.equal(null);
    expect(first.body.runs[0]).to.include.keys('status', 'phase', 'halt_class', 'created_at', 'compute_backend');
    expect((await gw.req('GET', '/v1/runs', { token: beta })).body.runs).to.have.length(1);
    expect((await gw.req('GET', '/v1/runs?status=failed', { token: alpha })).body.runs).to.deep.equal([]);
  });

  it('answers 400 {detail} naming the parameter for a bad status, limit or cursor, and 403 without the status scope', async () => {
    for (const [q, param] of [
      ['status=bogus', 'status'],
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['limit=abc', 'limit'],
      ['limit=1e2', 'limit'],
      ['limit=1&limit=2', 'limit'],
      ['cursor=not-ours', 'cursor'],
      [`cursor=${'A'.repeat(1000)}`, 'cursor'],
    ]) {
      const r = await gw.req('GET', `/v1/runs?${q}`, { token: alpha });
      expect(r.status, q).to.equal(400);
      expect(r.body.detail, q).to.be.a('string').and.include(param);
    }
    expect((await gw.req('GET', '/v1/runs', { token: reader })).status).to.equal(403);
    expect((await gw.req('GET', '/v1/runs')).status).to.equal(401);
  });
});

describe('recovery of a run whose runner is on another host', () => {
  let gw: TestGateway;
  const alpha = newToken();
  before(async () => {
    gw = await startGateway({ keys: { [alpha]: { tenant_id: 'alpha', rate_limit_per_minute: 0, max_concurrent_runs: 1 } } });
  });
  after(() => gw.close());

  it('checks the pid of an owner only in its own pid space (this boot, this pid namespace)', () => {
    const mine = runnerOwner();
    expect(ownerIsDead(mine), 'this process').to.equal(false);
    const [space] = mine.split(':');
    const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
    expect(ownerIsDead(`${space}:${gone}:x`), 'an exited process of this pid space').to.equal(true);
    expect(ownerIsDead(`${space}:1:x`), 'a live one').to.equal(false);
    expect(ownerIsDead(`0123456789abcdef:${gone}:x`), 'another host, container or boot: only its lease tells').to.equal(false);
    expect(ownerIsDead('garbage'), 'not an owner').to.equal(false);
  });

  it('waits out a live lease, then ends the run runner_lost once the lease is gone, and frees its slot', async () => {
    const s = gw.gateway.services;
    const accepted = await gw.req('POST', '/v1/predict', { token: alpha, body: { plan: [step(), step()] } });
    const runId = accepted.body.run_id as string;
    const run = (await s.runs.load(runId))!;
    // a runner on another host (its pid cannot be checked here) holds a short lease and has the run at step 1
    await s.state.atomic.put(runnerKey(runId), 'elsewhere.example:4242:abc', 1500);
    expect(await s.runs.save({ ...run, status: 'running', phase: 'running', checkpoint_step: 1 }, 'elsewhere.example:4242:abc')).to.equal(true);
    const requeued: string[] = [];
    const recovery = new RunRecovery({ runs: s.runs, atomic: s.state.atomic, requeue: async (id) => void requeued.push(id), log: s.log, intervalMs: 200, queuedGraceMs: 60_000 });
    await recovery.start();
    try {
      await sleep(600);
      expect((await s.runs.load(runId))!.status, 'a live lease is respected').to.equal('running');
      expect((await gw.req('POST', '/v1/predict', { token: alpha, body: { plan: [step()] } })).status, 'the slot is still held').to.equal(429);
      expect(await until(async () => (await s.runs.load(runId))!.status === 'failed', 5_000)).to.equal(true);
    } finally {
      await recovery.close();
    }
    const ended = (await gw.req('GET', `/v1/runs/${runId}`, { token: alpha })).body;
    expect(ended.halt_class).to.equal('runner_lost');
    expect(ended.resume_step).to.equal(1);
    expect(requeued).to.deep.equal([]);
    expect((await gw.req('POST', '/v1/predict', { token: alpha, body: { plan: [step()] } })).status, 'the slot is free').to.equal(200);
  });
});
