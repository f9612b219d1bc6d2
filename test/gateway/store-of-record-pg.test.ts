// The PostgreSQL store of record (SERVICE_DATABASE_URL) against a throwaway
// cluster the test starts: the same behaviour as the SQLite tables, with two
// pools standing for two replicas.
import { expect } from 'chai';
import { openPool, type Pool } from '../../gateway/state/pg/db.ts';
import { PgAtomicOps } from '../../gateway/state/pg/atomic.ts';
import { PgEventTable, PgKeyedStore, PgOutbox, PgRunTable } from '../../gateway/state/pg/tables.ts';
import type { RunKey } from '../../gateway/state/tables.ts';
import { sleep } from '../support/gateway.ts';
import { outboxItem } from '../../gateway/runs/webhooks.ts';
import { startPostgres, type PgHandle } from '../support/postgres.ts';
import { expectPagesAsPageOf, pagingRuns, type PagedRow } from '../support/paging.ts';

describe('store of record on PostgreSQL', function () {
  this.timeout(60_000);
  let pg: PgHandle;
  let a: Pool;
  let b: Pool;

  before(async () => {
    pg = await startPostgres();
    // two replicas start at once: migrations apply once
    [a, b] = await Promise.all([openPool(pg.url), openPool(pg.url)]);
  });
  after(async () => {
    await Promise.all([a?.end(), b?.end()]);
    await pg?.stop();
  });

  it('applies each migration once when two replicas start together', async () => {
    const { rows } = await a.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
    expect(rows.map((r) => r.version)).to.deep.equal([1, 2, 3, 4]);
  });

  it('pages a tenant runs newest first exactly as the SQLite and in-memory tables do, and refuses a forged cursor', async () => {
    const runs = new PgRunTable<PagedRow>(a);
    const all = pagingRuns();
    for (const r of all) await runs.put(r);
    await expectPagesAsPageOf(runs, all, { statuses: [undefined, 'failed'], limits: [4] });
  });

  it('never overwrites a run that has ended, whichever replica writes', async () => {
    const one = new PgRunTable<RunKey>(a);
    const two = new PgRunTable<RunKey>(b);
    const r = {
      run_id: 'ended-1',
      tenant_id: 't',
      status: 'running',
      created_at: new Date().toISOString(),
    };
    expect(await one.putUnlessEnded(r)).to.equal(true);
    expect(await two.putUnlessEnded({ ...r, status: 'failed' })).to.equal(true);
    expect(await one.putUnlessEnded({ ...r, status: 'running' })).to.equal(false);
    expect((await two.get('ended-1'))!.status).to.equal('failed');
    expect((await one.unfinished()).map((x) => x.run_id)).to.not.include('ended-1');
  });

  it('fences a runner write by its lease on the server clock', async () => {
    const runs = new PgRunTable<RunKey & { n: number }>(a);
    const ops = new PgAtomicOps(b);
    const r = { run_id: 'fence-1', tenant_id: 't', status: 'running', created_at: new Date().toISOString(), n: 0 };
    await runs.put(r);
    expect(await runs.putIfLeased({ ...r, n: 1 }, 'runner:fence-1', 'A')).to.equal(false);
    await ops.claim('runner:fence-1', 'A', 300);
    expect(await runs.putIfLeased({ ...r, n: 2 }, 'runner:fence-1', 'A')).to.equal(true);
    expect(await runs.putIfLeased({ ...r, n: 3 }, 'runner:fence-1', 'B')).to.equal(false);
    await sleep(400);
    expect(await runs.putIfLeased({ ...r, n: 4 }, 'runner:fence-1', 'A'), 'expired').to.equal(false);
    expect((await runs.get('fence-1'))!.n).to.equal(2);
  });

  it('keeps event seq dense and ordered when two replicas append to one run at once', async () => {
    const one = new PgEventTable(a, 10_000);
    const two = new PgEventTable(b, 10_000);
    await Promise.all(Array.from({ length: 200 }, (_, i) => (i % 2 ? one : two).append('run-ev', { n: i })));
    const events = await one.after<{ n: number }>('run-ev', 0);
    expect(events.map((e) => e.seq)).to.deep.equal(Array.from({ length: 200 }, (_, i) => i + 1));
    expect(new Set(events.map((e) => e.n)).size).to.equal(200);
    expect((await two.after('run-ev', 190)).map((e) => e.seq)).to.deep.equal([191, 192, 193, 194, 195, 196, 197, 198, 199, 200]);
  });

  it('accepts a run with its first event in one statement, and a failing one writes neither', async () => {
    const events = new PgEventTable(a, 10_000);
    const runs = new PgRunTable<RunKey>(b);
    const r = { run_id: 'acc-pg-1', tenant_id: 't', status: 'queued', created_at: new Date().toISOString() };
    const e = await events.appendWithRun(r, { type: 'run.status', n: 1 });
    expect(e.seq).to.equal(1);
    expect(await runs.get('acc-pg-1')).to.deep.equal(r);
    expect((await new PgEventTable(b, 10_000).append('acc-pg-1', { type: 'run.status', n: 2 })).seq, 'the seq counter was taken').to.equal(2);
    let err: unknown;
    await events.appendWithRun({ ...r, run_id: 'acc-pg-2', created_at: null as unknown as string }, { type: 'run.status' }).catch((x: unknown) => (err = x));
    expect(err).to.be.instanceOf(Error);
    expect(await runs.get('acc-pg-2')).to.equal(undefined);
    expect(await events.after('acc-pg-2', 0)).to.deep.equal([]);
  });

  it('saves a run fenced with its event in one statement, and appends nothing when the save is refused', async () => {
    const events = new PgEventTable(a, 10_000);
    const runs = new PgRunTable<RunKey & { n: number }>(b);
    const ops = new PgAtomicOps(b);
    const r = (n: number, status = 'running') => ({ run_id: 'sae-1', tenant_id: 't', status, created_at: '2026-01-01T00:00:00.000Z', n });
    await events.appendWithRun(r(0), { type: 'run.status' });
    expect(await events.appendIfLeased(r(1), 'runner:sae-1', 'A', { type: 'step.started' }), 'no lease').to.equal(null);
    await ops.claim('runner:sae-1', 'B', 60_000);
    expect(await events.appendIfLeased(r(2), 'runner:sae-1', 'A', { type: 'step.started' }), "another runner's lease").to.equal(null);
    await ops.put('runner:sae-1', 'A', 300);
    expect((await events.appendIfLeased(r(3), 'runner:sae-1', 'A', { type: 'step.started' }))!.seq).to.equal(2);
    await sleep(400);
    expect(await events.appendIfLeased(r(4), 'runner:sae-1', 'A', { type: 'step.finished' }), 'expired').to.equal(null);
    await ops.put('runner:sae-1', 'A', 60_000);
    await runs.put(r(5, 'failed'));
    expect(await events.appendIfLeased(r(6), 'runner:sae-1', 'A', { type: 'step.finished' }), 'an ended run').to.equal(null);
    expect((await events.after<{ type: string }>('sae-1', 0)).map((e) => [e.seq, e.type])).to.deep.equal([
      [1, 'run.status'],
      [2, 'step.started'],
    ]);
    expect((await runs.get('sae-1'))!).to.include({ status: 'failed', n: 5 });
    expect((await new PgEventTable(b, 10_000).append('sae-1', { type: 'run.ended' })).seq, 'a refused save took no seq').to.equal(3);
  });

  it('ends a run with its run.ended and its webhook in one statement: of endings racing on two replicas one writes all, the others nothing', async () => {
    const one = new PgEventTable(a, 10_000);
    const two = new PgEventTable(b, 10_000);
    const runs = new PgRunTable<RunKey & { by: number }>(a);
    const r = (status: string, by: number) => ({ run_id: 'end-pg-1', tenant_id: 't', status, created_at: '2026-01-01T00:00:00.000Z', by });
    await one.appendWithRun(r('running', 0), { type: 'run.status' });
    const webhook = (by: number) => outboxItem('end-pg-1', { url: 'https://example.com/hook', secret_name: '' }, { by });
    const endings = await Promise.all(
      [1, 2, 3, 4].map((by) => (by % 2 ? one : two).appendIfUnended(r(by % 2 ? 'cancelled' : 'failed', by), { type: 'run.ended', by }, webhook(by))),
    );
    const won = endings.filter((e) => e !== null);
    expect(won).to.have.length(1);
    expect(won[0]!.seq).to.equal(2);
    const row = (await runs.get('end-pg-1'))!;
    expect(row.by, 'the row is the winner').to.equal(won[0]!.by);
    expect((await one.after<{ type: string; by?: number }>('end-pg-1', 0)).map((e) => [e.seq, e.type, e.by])).to.deep.equal([
      [1, 'run.status', undefined],
      [2, 'run.ended', row.by],
    ]);
    const { rows: queued } = await b.query<{ run_id: string; payload: string; attempt: number; due_at: string }>("SELECT run_id, payload, attempt, due_at FROM webhook_outbox WHERE run_id = 'end-pg-1'");
    expect(queued.map((q) => [q.run_id, JSON.parse(q.payload).by, q.attempt]), "the winner's webhook only").to.deep.equal([['end-pg-1', row.by, 1]]);
    expect(Number(queued[0]!.due_at)).to.be.closeTo(Date.now(), 60_000);
    // the outbox test below starts from an empty outbox
    await b.query("DELETE FROM webhook_outbox WHERE run_id = 'end-pg-1'");
    // a run with no row yet is written with its event (an ending before any save)
    expect((await two.appendIfUnended(r('failed', 9), { type: 'run.ended' }))).to.equal(null);
    expect((await two.appendIfUnended({ ...r('failed', 9), run_id: 'end-pg-2' }, { type: 'run.ended' }))!.seq).to.equal(1);
  });

  it('keeps each run seq dense and in its caller order when four runs write at once on two replicas', async () => {
    const tables = [new PgEventTable(a, 10_000), new PgEventTable(b, 10_000)];
    const ops = new PgAtomicOps(a);
    const ids = ['c0', 'c1', 'c2', 'c3'];
    const N = 40;
    await Promise.all(
      ids.map(async (id, k) => {
        const row = (n: number) => ({ run_id: `conc-${id}`, tenant_id: 't', status: 'running', created_at: '2026-01-01T00:00:00.000Z', n });
        await ops.claim(`runner:conc-${id}`, 'me', 60_000);
        await tables[k % 2]!.appendWithRun(row(0), { type: 'run.status', n: 0 });
        for (let n = 1; n <= N; n++) {
          const t = tables[(k + n) % 2]!;
          if (n % 3 === 0) expect(await t.appendIfLeased(row(n), `runner:conc-${id}`, 'me', { type: 'step.started', n })).to.not.equal(null);
          else await t.append(`conc-${id}`, { type: 'step.finished', n });
        }
      }),
    );
    for (const id of ids) {
      const log = await tables[0]!.after<{ n: number }>(`conc-${id}`, 0);
      expect(log.map((e) => e.seq), id).to.deep.equal(Array.from({ length: N + 1 }, (_, i) => i + 1));
      expect(log.map((e) => e.n), id).to.deep.equal(Array.from({ length: N + 1 }, (_, i) => i));
    }
  });

  it('claims, renews and expires leases on the server clock, and counts slots exactly across replicas', async () => {
    const one = new PgAtomicOps(a);
    const two = new PgAtomicOps(b);
    expect(await one.claim('runner:x', 'A', 400)).to.equal(null);
    expect(await two.claim('runner:x', 'B', 400)).to.equal('A');
    expect(await two.renew('runner:x', 'B', 400)).to.equal(false);
    expect(await one.renew('runner:x', 'A', 400)).to.equal(true);
    await sleep(500);
    expect(await two.get('runner:x')).to.equal(null);
    expect(await one.renew('runner:x', 'A', 400), 'an expired lease is not revived').to.equal(false);
    expect(await two.claim('runner:x', 'B', 10_000)).to.equal(null);
    expect(await one.deleteIf('runner:x', 'A')).to.equal(false);
    expect(await two.deleteIf('runner:x', 'B')).to.equal(true);
    const got = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? one : two).acquireSlot('tenant:t', `run-${i}`, 5)));
    expect(got.filter(Boolean).length).to.equal(5);
    expect(await one.slotCount('tenant:t')).to.equal(5);
    expect(await one.acquireSlot('tenant:t', 'run-0', 5), 're-adding a holder').to.equal(got[0]);
    const held = got.findIndex(Boolean);
    expect(await two.releaseSlot('tenant:t', `run-${held}`)).to.equal(true);
    expect(await one.releaseSlot('tenant:t', `run-${held}`)).to.equal(false);
    // the count row (migration 003) stays exact through concurrent releases and takes on two replicas
    await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? one.releaseSlot('tenant:t', `run-${i}`) : two.acquireSlot('tenant:t', `new-${i}`, 5))));
    const exact = Number((await a.query<{ n: string }>("SELECT count(*) AS n FROM slots WHERE key = 'tenant:t'")).rows[0]!.n);
    expect(await two.slotCount('tenant:t')).to.equal(exact);
    expect(exact).to.be.at.most(5);
  });

  it('takes tokens exactly across replicas', async () => {
    const one = new PgAtomicOps(a);
    const two = new PgAtomicOps(b);
    const took = await Promise.all(Array.from({ length: 30 }, (_, i) => (i % 2 ? one : two).takeToken('bucket:t', 10, 0.001)));
    expect(took.filter((t) => t.allowed).length).to.equal(10);
  });

  it('keeps keyed stores per namespace, and hands each due outbox item to one sender', async () => {
    const s = new PgKeyedStore<{ v: number }>(a, 'recipes:alpha');
    await s.set('b', { v: 2 });
    await s.set('a', { v: 1 });
    expect(await new PgKeyedStore(b, 'recipes:alpha').keys()).to.deep.equal(['a', 'b']);
    expect(await new PgKeyedStore(b, 'recipes:beta').keys()).to.deep.equal([]);
    expect(await s.delete('a')).to.equal(true);
    expect(await s.delete('a')).to.equal(false);

    const one = new PgOutbox(a);
    const two = new PgOutbox(b);
    for (let i = 0; i < 10; i++)
      await one.add({
        id: `msg_${i}`,
        run_id: 'r',
        target: '{}',
        payload: '{}',
        attempt: 1,
        due_at: 100,
      });
    const [x, y] = await Promise.all([one.take(100, 10, 50), two.take(100, 10, 50)]);
    const ids = [...x, ...y].map((i) => i.id);
    expect(ids.length).to.equal(10);
    expect(new Set(ids).size, 'no item went to both senders').to.equal(10);
    expect(await two.take(120, 10, 50)).to.deep.equal([]);
    await one.reschedule('msg_0', 2, 500);
    expect((await two.take(160, 20, 50)).length, 'leases ran out: all but the rescheduled one are due again').to.equal(9);
    for (let i = 0; i < 10; i++) await one.remove(`msg_${i}`);
    expect(await two.nextDue()).to.equal(undefined);
  });
});
