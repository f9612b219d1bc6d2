// A run's own writes on the store of record (issue 15): on SQLite the rows and
// events written within one event-loop turn share one commit (one fsync), and
// a runner's fenced save carries its event in the same write, the event only
// if the save held; on every store, a runner that lost its lease appends nothing.
import { expect } from 'chai';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDb, type Db } from '../../gateway/state/sqlite/db.ts';
import { SqliteEventTable, SqliteRunTable } from '../../gateway/state/sqlite/tables.ts';
import { SqliteAtomicOps } from '../../gateway/state/sqlite/atomic.ts';
import { committerOf } from '../../gateway/state/sqlite/group-commit.ts';
import { SqliteOutbox } from '../../gateway/state/outbox.ts';
import { outboxItem } from '../../gateway/runs/webhooks.ts';
import type { RunKey } from '../../gateway/state/tables.ts';
import { runnerKey } from '../../gateway/runs/owners.ts';
import { TEST_STORE } from '../support/store.ts';
import { newToken, startGateway, step, type TestGateway } from '../support/gateway.ts';

describe('group commit of run writes on SQLite', () => {
  let db: Db;
  let reader: Db;
  let file: string;

  beforeEach(async () => {
    file = path.join(await mkdtemp(path.join(tmpdir(), 'runplane-lean-')), 'runplane.db');
    db = openDb(file);
    reader = openDb(file);
  });
  afterEach(() => {
    for (const d of [db, reader]) if (d.open) d.close();
  });

  const run = (id: string, n = 0, status = 'running'): RunKey & { n: number } => ({ run_id: id, tenant_id: 't', status, created_at: new Date().toISOString(), n });

  it('commits the rows and events of four runs written in one turn once; a failing write rejects its own caller only', async () => {
    const runs = new SqliteRunTable<RunKey & { n: number }>(db);
    const events = new SqliteEventTable(db, 10_000);
    const ops = new SqliteAtomicOps(db);
    const ids = ['a', 'b', 'c', 'd'];
    for (const id of ids) await ops.claim(runnerKey(id), 'me', 60_000);
    await Promise.all(ids.map((id) => events.appendWithRun(run(id), { type: 'run.status' })));
    const committer = committerOf(db);
    expect(committer, 'one committer per database').to.equal(committerOf(db));
    const before = committer.commits;
    const rows = reader.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM run_events');
    const writes = ids.flatMap((id) => [
      runs.putIfLeased(run(id, 1), runnerKey(id), 'me'),
      events.append(id, { type: 'step.started' }),
      events.appendIfLeased(run(id, 2), runnerKey(id), 'me', { type: 'step.finished' }),
      runs.put(run(id, 3)),
    ]);
    // a row without its created_at breaks a NOT NULL constraint: its savepoint alone rolls back
    const broken = runs.putUnlessEnded({ ...run('e'), created_at: null as unknown as string });
    expect(rows.get()!.n, 'nothing is written before the turn ends').to.equal(4);
    const settled = await Promise.allSettled([...writes, broken]);
    expect(committer.commits - before, 'one commit for the turn').to.equal(1);
    expect(settled.map((s) => s.status)).to.deep.equal([...writes.map(() => 'fulfilled'), 'rejected']);
    expect(rows.get()!.n).to.equal(12);
    for (const id of ids) {
      expect((await events.after<{ type: string }>(id, 0)).map((e) => [e.seq, e.type])).to.deep.equal([
        [1, 'run.status'],
        [2, 'step.started'],
        [3, 'step.finished'],
      ]);
      // the writes of one turn commit in call order: the put after the fenced save is the row kept
      expect((await runs.get(id))!.n).to.equal(3);
    }
    expect(await runs.get('e')).to.equal(undefined);
  });

  it('appends nothing with a fenced save that did not hold: no lease, another owner, an expired lease, an ended run', async () => {
    let now = Date.now();
    const ops = new SqliteAtomicOps(db, () => now);
    const runs = new SqliteRunTable<RunKey & { n: number }>(db);
    const events = new SqliteEventTable(db, 10_000);
    const r = run('f');
    await events.appendWithRun(r, { type: 'run.status' });
    const key = runnerKey('f');
    expect(await events.appendIfLeased(run('f', 1), key, 'me', { type: 'step.started' }), 'no lease').to.equal(null);
    await ops.claim(key, 'other', 60_000);
    expect(await events.appendIfLeased(run('f', 2), key, 'me', { type: 'step.started' }), "another runner's lease").to.equal(null);
    await ops.put(key, 'me', 60_000);
    expect((await events.appendIfLeased(run('f', 3), key, 'me', { type: 'step.started' }))!.seq).to.equal(2);
    // the lease runs out on the database's clock (expires_at is compared with Date.now() at the commit)
    await ops.put(key, 'me', -1);
    now += 1;
    expect(await events.appendIfLeased(run('f', 4), key, 'me', { type: 'step.finished' }), 'an expired lease').to.equal(null);
    await ops.put(key, 'me', 60_000);
    await runs.put(run('f', 5, 'failed'));
    expect(await events.appendIfLeased(run('f', 6), key, 'me', { type: 'step.finished' }), 'an ended run').to.equal(null);
    expect((await events.after<{ type: string }>('f', 0)).map((e) => e.type)).to.deep.equal(['run.status', 'step.started']);
    expect((await runs.get('f'))!).to.include({ status: 'failed', n: 5 });
  });

  it('ends a run with its run.ended and its webhook in one commit: of endings racing, one writes all and the others nothing', async () => {
    const runs = new SqliteRunTable<RunKey & { n: number }>(db);
    const events = new SqliteEventTable(db, 10_000);
    // another process ends the run too, as a cancel on another gateway would
    const other = new SqliteEventTable(reader, 10_000);
    const outbox = new SqliteOutbox(reader);
    await events.appendWithRun(run('g'), { type: 'run.status' });
    const webhook = (runId: string, n: number) => outboxItem(runId, { url: 'https://example.com/hook', secret_name: '' }, { n });
    const endings = await Promise.all(
      [1, 2, 3, 4].map((n) => (n % 2 ? events : other).appendIfUnended(run('g', n, n % 2 ? 'cancelled' : 'failed'), { type: 'run.ended', n }, webhook('g', n))),
    );
    const won = endings.filter((e) => e !== null);
    expect(won).to.have.length(1);
    const row = (await runs.get('g'))!;
    expect(row.n, 'the row is the winner').to.equal(won[0]!.n);
    expect((await events.after<{ type: string; n?: number }>('g', 0)).map((e) => [e.seq, e.type, e.n])).to.deep.equal([
      [1, 'run.status', undefined],
      [2, 'run.ended', row.n],
    ]);
    const queued = await outbox.take(Date.now() + 1000, 10, 1000);
    expect(queued.map((i) => [i.run_id, JSON.parse(i.payload).n]), "the winner's webhook only").to.deep.equal([['g', row.n]]);
    // a failing row write appends nothing and queues nothing
    let err: unknown;
    await events.appendIfUnended({ ...run('h'), created_at: null as unknown as string }, { type: 'run.ended' }, webhook('h', 0)).catch((x: unknown) => (err = x));
    expect(err).to.be.instanceOf(Error);
    expect(await events.after('h', 0)).to.deep.equal([]);
    expect(await outbox.take(Date.now() + 1000, 10, 1000)).to.deep.equal([]);
  });

  it('keeps each run seq dense and in its caller order when four runs write at once, in fewer commits than writes', async () => {
    const runs = new SqliteRunTable<RunKey & { n: number }>(db);
    const events = new SqliteEventTable(db, 10_000);
    // a second connection appends too, as a cancel on another gateway process would
    const other = new SqliteEventTable(reader, 10_000);
    const ops = new SqliteAtomicOps(db);
    const ids = ['r0', 'r1', 'r2', 'r3'];
    const committer = committerOf(db);
    const before = committer.commits;
    const N = 60;
    let writes = 0;
    await Promise.all(
      ids.map(async (id, k) => {
        await ops.claim(runnerKey(id), 'me', 60_000);
        await events.appendWithRun(run(id), { type: 'run.status', n: 0 });
        writes++;
        for (let n = 1; n <= N; n++) {
          // a runner's step, as the walker writes it: a fenced save with step.started, plain events, a save now and then
          if (n % 3 === 0) expect(await events.appendIfLeased(run(id, n), runnerKey(id), 'me', { type: 'step.started', n }), `${id} ${n}`).to.not.equal(null);
          else if (n % 7 === 0 && k === 0) await other.append(id, { type: 'run.cancel_requested', n });
          else await events.append(id, { type: 'step.finished', n });
          if (n % 10 === 0) await runs.putIfLeased(run(id, n), runnerKey(id), 'me');
          writes++;
        }
      }),
    );
    for (const id of ids) {
      const log = await events.after<{ n: number }>(id, 0);
      expect(log.map((e) => e.seq), id).to.deep.equal(Array.from({ length: N + 1 }, (_, i) => i + 1));
      expect(log.map((e) => e.n), id).to.deep.equal(Array.from({ length: N + 1 }, (_, i) => i));
      expect((await runs.get(id))!.n).to.equal(60);
    }
    // four runs stepping together share their commits (the other connection's appends commit on their own)
    expect(committer.commits - before).to.be.below(writes / 2);
  });
});

describe(`a runner's save with its event (RunsService.saveAndEmit) on ${TEST_STORE} and in memory`, function () {
  this.timeout(30_000);
  for (const store of [TEST_STORE, 'memory'] as const) {
    describe(store, () => {
      let gw: TestGateway;
      const alpha = newToken();
      before(async () => {
        gw = await startGateway({ keys: { [alpha]: { tenant_id: 'alpha', rate_limit_per_minute: 0 } }, ...(store === 'memory' ? { config: { stateStore: 'memory' } } : {}) });
      });
      after(() => gw?.close());

      it('saves the run and appends the event only while this runner holds the lease', async () => {
        const s = gw.gateway.services;
        const accepted = await gw.req('POST', '/v1/predict', { token: alpha, body: { plan: [step(), step()] } });
        expect(accepted.status, accepted.text).to.equal(200);
        const runId = accepted.body.run_id as string;
        const run = (await s.runs.load(runId))!;
        const types = async () => (await s.runs.history(runId)).map((e) => e.type);
        const first = await types();
        expect(await s.runs.saveAndEmit({ ...run, status: 'running', checkpoint_step: 1 }, 'me', 'step.started', { path: 'steps[1]' }), 'no lease').to.equal(false);
        expect(await s.runs.claimForRunner(runId, 'me', 60_000)).to.equal(true);
        expect(await s.runs.saveAndEmit({ ...run, status: 'running', checkpoint_step: 1 }, 'me', 'step.started', { path: 'steps[1]' })).to.equal(true);
        expect((await s.runs.load(runId))!.checkpoint_step).to.equal(1);
        // recovery took the run over: the old runner's next write is refused, and its event never reaches the log
        await s.state.atomic.put(runnerKey(runId), 'recovery', 60_000);
        expect(await s.runs.saveAndEmit({ ...run, status: 'running', checkpoint_step: 2 }, 'me', 'step.finished', { path: 'steps[1]' })).to.equal(false);
        expect(await types()).to.deep.equal([...first, 'step.started']);
        expect((await s.runs.load(runId))!.checkpoint_step).to.equal(1);
        const seqs = (await s.runs.history(runId)).map((e) => e.seq);
        expect(seqs).to.deep.equal(seqs.map((_, i) => i + 1));
      });

      it("appends a runner's event between saves only while it holds the lease of an unfinished run", async () => {
        const s = gw.gateway.services;
        const accepted = await gw.req('POST', '/v1/predict', { token: alpha, body: { plan: [step(), step()] } });
        const runId = accepted.body.run_id as string;
        const run = (await s.runs.load(runId))!;
        const types = async () => (await s.runs.history(runId)).map((e) => e.type);
        const first = await types();
        expect(await s.runs.emitFenced(run, 'me', 'loop.started', { path: 'steps[0]' }), 'no lease').to.equal(false);
        expect(await s.runs.claimForRunner(runId, 'me', 60_000)).to.equal(true);
        expect(await s.runs.emitFenced(run, 'me', 'loop.started', { path: 'steps[0]' })).to.equal(true);
        expect(await s.runs.emitFenced(run, 'other', 'loop.started', { path: 'steps[0]' }), "another runner's").to.equal(false);
        // the run ended elsewhere (recovery, a cancel) while this runner still holds its lease
        await s.runs.end(run, { status: 'failed', haltClass: 'runner_lost' });
        expect(await s.runs.emitFenced(run, 'me', 'step.finished', { path: 'steps[0]' }), 'an ended run').to.equal(false);
        const after = await types();
        expect(after.slice(0, first.length + 1)).to.deep.equal([...first, 'loop.started']);
        expect(after.slice(first.length + 1)).to.not.include('step.finished');
        expect(after[after.length - 1]).to.equal('run.ended');
      });
    });
  }
});
