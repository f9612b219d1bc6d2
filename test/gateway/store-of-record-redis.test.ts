// Redis as the store of record (SERVICE_REDIS_URL without a database), against
// a throwaway redis-server: two backends stand for two replicas. Every write a
// guard decides (an ending, a runner's fenced save and event) is one script, so
// of writers racing one writes and the others nothing, as on the SQL stores.
import { expect } from 'chai';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createClient } from '@redis/client';
import { openStateBackend, type StateBackend } from '../../gateway/state/backend.ts';
import { MemoryOutbox } from '../../gateway/state/outbox.ts';
import type { RunKey } from '../../gateway/state/tables.ts';
import { expectPagesAsPageOf, pagingRuns, type PagedRow } from '../support/paging.ts';
import { RedisEventLog } from '../../gateway/runs/events.ts';
import { outboxItem } from '../../gateway/runs/webhooks.ts';
import { startRedis, type RedisHandle } from '../support/redis.ts';
import { sleep } from '../support/gateway.ts';

type Row = RunKey & { n: number };

describe('store of record on Redis', function () {
  this.timeout(60_000);
  let redis: RedisHandle;
  let a: StateBackend;
  let b: StateBackend;
  const logs: RedisEventLog[] = [];
  const outboxes = [new MemoryOutbox(), new MemoryOutbox()];

  before(async () => {
    redis = await startRedis();
    const dataDir = await mkdtemp(path.join(tmpdir(), 'runplane-redis-'));
    [a, b] = await Promise.all([0, 1].map(() => openStateBackend({ redisUrl: redis.url, dataDir, maxEventsPerRun: 100 })));
    for (const [i, s] of [a, b].entries()) logs.push(await RedisEventLog.open(redis.url, { shared: s.redis, writes: s.runWrites, outbox: outboxes[i] }));
  });
  after(async () => {
    for (const l of logs) await l.close();
    await Promise.all([a?.close(), b?.close()]);
    await redis?.stop();
  });

  const row = (runId: string, n: number, status = 'running'): Row => ({ run_id: runId, tenant_id: 't', status, created_at: '2026-01-01T00:00:00.000Z', n });

  it('never overwrites a run that has ended: of endings racing on two replicas exactly one is written', async () => {
    const runs = [a.runs<Row>(), b.runs<Row>()];
    await runs[0]!.put(row('race-1', 0));
    const wins = await Promise.all(Array.from({ length: 20 }, (_, i) => runs[i % 2]!.putUnlessEnded(row('race-1', i + 1, i % 2 ? 'cancelled' : 'failed'))));
    expect(wins.filter(Boolean)).to.have.length(1);
    const stored = (await runs[1]!.get('race-1'))!;
    expect(stored.n, 'the row is the winner').to.equal(wins.indexOf(true) + 1);
    expect(await runs[0]!.putUnlessEnded(row('race-1', 99))).to.equal(false);
    expect(await runs[0]!.putUnlessEnded(row('race-2', 1)), 'no row yet').to.equal(true);
    expect((await runs[0]!.unfinished()).map((r) => r.run_id)).to.deep.equal(['race-2']);
  });

  it('fences a runner write by its lease: refused without it, under another owner, once it expired, and once the run ended', async () => {
    const runs = b.runs<Row>();
    expect(await runs.putIfLeased(row('f1', 1), 'runner:f1', 'A'), 'no row').to.equal(false);
    await runs.put(row('f1', 0));
    expect(await runs.putIfLeased(row('f1', 1), 'runner:f1', 'A'), 'no lease at all').to.equal(false);
    await a.atomic.claim('runner:f1', 'A', 60_000);
    expect(await runs.putIfLeased(row('f1', 2), 'runner:f1', 'A')).to.equal(true);
    expect(await runs.putIfLeased(row('f1', 3), 'runner:f1', 'B'), "another runner's lease").to.equal(false);
    await a.atomic.put('runner:f1', 'A', 150);
    await sleep(250);
    expect(await runs.putIfLeased(row('f1', 4), 'runner:f1', 'A'), 'an expired lease').to.equal(false);
    await a.atomic.put('runner:f1', 'A', 60_000);
    await runs.put(row('f1', 5, 'failed'));
    expect(await runs.putIfLeased(row('f1', 6), 'runner:f1', 'A'), 'an ended run').to.equal(false);
    expect((await a.runs<Row>().get('f1'))!).to.include({ status: 'failed', n: 5 });
  });

  it('saves a run fenced with its event in one step, and appends nothing (no seq taken) when the save or the event is refused', async () => {
    const [one, two] = logs as [RedisEventLog, RedisEventLog];
    const ev = (type: string) => ({ run_id: 'sae-1', tenant_id: 't', type, data: {} });
    await one.appendWithRun(row('sae-1', 0), ev('run.status'));
    expect(await one.appendIfLeased(row('sae-1', 1), 'runner:sae-1', 'A', ev('step.started')), 'no lease').to.equal(null);
    await b.atomic.claim('runner:sae-1', 'B', 60_000);
    expect(await one.appendIfLeased(row('sae-1', 2), 'runner:sae-1', 'A', ev('step.started')), "another runner's lease").to.equal(null);
    expect(await one.appendWhileLeased('runner:sae-1', 'A', ev('step.log')), "an event under another runner's lease").to.equal(null);
    await b.atomic.put('runner:sae-1', 'A', 60_000);
    expect((await one.appendIfLeased(row('sae-1', 3), 'runner:sae-1', 'A', ev('step.started')))!.seq).to.equal(2);
    expect((await two.appendWhileLeased('runner:sae-1', 'A', ev('step.log')))!.seq).to.equal(3);
    await a.runs<Row>().put(row('sae-1', 5, 'failed'));
    expect(await one.appendIfLeased(row('sae-1', 6), 'runner:sae-1', 'A', ev('step.finished')), 'an ended run').to.equal(null);
    expect(await two.appendWhileLeased('runner:sae-1', 'A', ev('step.log')), 'an event of an ended run').to.equal(null);
    expect((await two.history('sae-1')).map((e) => [e.seq, e.type])).to.deep.equal([
      [1, 'run.status'],
      [2, 'step.started'],
      [3, 'step.log'],
    ]);
    expect((await b.runs<Row>().get('sae-1'))!).to.include({ status: 'failed', n: 5 });
    expect((await two.append(ev('run.ended'))).seq, 'a refused write took no seq').to.equal(4);
  });

  it('ends a run with its run.ended in one step: of endings racing on two replicas one writes the row, the event and its webhook, the others nothing', async () => {
    const webhook = (n: number) => outboxItem('end-1', { url: 'https://example.com/hook', secret_name: '' }, { n });
    await logs[0]!.appendWithRun(row('end-1', 0), { run_id: 'end-1', tenant_id: 't', type: 'run.status', data: {} });
    const endings = await Promise.all(
      Array.from({ length: 8 }, (_, i) => logs[i % 2]!.appendIfUnended(row('end-1', i + 1, i % 2 ? 'cancelled' : 'failed'), { run_id: 'end-1', tenant_id: 't', type: 'run.ended', data: { n: i + 1 } }, webhook(i + 1))),
    );
    const won = endings.filter((e) => e !== null);
    expect(won).to.have.length(1);
    expect(won[0]!.seq).to.equal(2);
    const stored = (await a.runs<Row>().get('end-1'))!;
    expect(stored.n, 'the row is the winner').to.equal(won[0]!.data.n);
    expect((await logs[1]!.history('end-1')).map((e) => [e.seq, e.type, e.data.n])).to.deep.equal([
      [1, 'run.status', undefined],
      [2, 'run.ended', stored.n],
    ]);
    const queued = [...(await outboxes[0]!.take(Date.now() + 1000, 10, 1000)), ...(await outboxes[1]!.take(Date.now() + 1000, 10, 1000))];
    expect(queued.map((q) => JSON.parse(q.payload).n), "the winner's webhook only").to.deep.equal([stored.n]);
  });

  it('pages a tenant runs newest first exactly as the SQL and in-memory tables do, reading its index, and refuses a forged cursor', async () => {
    const runs = a.runs<PagedRow>();
    const all = pagingRuns();
    for (const [i, r] of all.entries()) await (i % 2 ? runs.put(r) : runs.putUnlessEnded(r));
    await expectPagesAsPageOf(b.runs<PagedRow>(), all, { statuses: [undefined, 'failed', 'running'], limits: [1, 4, 100] });
  });

  it('indexes once, at open, the rows a store had before its indexes; a run that ends leaves the recovery sweep', async () => {
    const raw = createClient({ url: redis.url });
    await raw.connect();
    const dataDir = await mkdtemp(path.join(tmpdir(), 'runplane-redis-'));
    try {
      // rows as the previous release wrote them: keyv's layout, no index, no marker
      await raw.del('runplane:runs-indexed');
      const old = (i: number, status: string) => ({ ...row(`old-${i}`, i, status), tenant_id: 'old-tenant', created_at: `2025-01-0${i}T00:00:00.000Z` });
      for (const [i, status] of ['queued', 'running', 'succeeded'].entries()) await raw.set(`runplane:runs:old-${i + 1}`, JSON.stringify({ value: old(i + 1, status) }));
      const c = await openStateBackend({ redisUrl: redis.url, dataDir, maxEventsPerRun: 100 });
      try {
        expect((await c.runs<Row>().page('old-tenant', { limit: 10 })).items.map((r) => r.run_id)).to.deep.equal(['old-3', 'old-2', 'old-1']);
        const sweep = async () => (await c.runs<Row>().unfinished()).map((r) => r.run_id).filter((id) => id.startsWith('old-'));
        expect(await sweep(), 'oldest first').to.deep.equal(['old-1', 'old-2']);
        expect(await raw.get('runplane:runs-indexed')).to.be.a('string');
        expect(await c.runs<Row>().putUnlessEnded(old(2, 'failed'))).to.equal(true);
        expect(await sweep()).to.deep.equal(['old-1']);
        // the sweep reads the unfinished runs only: an ended run leaves the set, it is not filtered out of it
        expect(await raw.sMembers('runplane:runs-unfinished')).to.include('old-1').and.not.include('old-2').and.not.include('old-3');
      } finally {
        await c.close();
      }
    } finally {
      await raw.close();
    }
  });

  it('answers views from the run head written with its row; a head missing or of another version is answered from the row, and indexing writes the missing ones', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'runplane-redis-'));
    const tenfold = (version: number) => ({ version, of: (r: Row) => ({ run_id: r.run_id, tenant_id: r.tenant_id, status: r.status, created_at: r.created_at, n: r.n * 10 }) });
    const raw = createClient({ url: redis.url });
    await raw.connect();
    const v1 = await openStateBackend({ redisUrl: redis.url, dataDir, maxEventsPerRun: 100, runView: tenfold(1) as never });
    try {
      const runs = v1.runs<Row, Row>();
      await runs.put({ ...row('head-1', 2), tenant_id: 'heads' });
      expect(await raw.get('runplane:runs-head:head-1')).to.match(/^\{"_v":1,/);
      expect(await runs.view('head-1')).to.deep.equal({ ...row('head-1', 20), tenant_id: 'heads' });
      // a head the row does not match shows the head is what is read
      await raw.set('runplane:runs-head:head-1', '{"_v":1,' + JSON.stringify({ ...row('head-1', 7), tenant_id: 'heads' }).slice(1));
      expect((await runs.view('head-1'))!.n, 'read from the head').to.equal(7);
      expect((await runs.page('heads', { limit: 5 })).items.map((v) => v.n)).to.deep.equal([7]);
      // of another version, or missing: from the row
      await raw.set('runplane:runs-head:head-1', '{"_v":0,' + JSON.stringify({ ...row('head-1', 7), tenant_id: 'heads' }).slice(1));
      expect((await runs.view('head-1'))!.n, 'another version').to.equal(20);
      await raw.del('runplane:runs-head:head-1');
      expect((await runs.page('heads', { limit: 5 })).items.map((v) => v.n), 'no head').to.deep.equal([20]);
      await raw.del('runplane:runs-indexed');
      const again = await openStateBackend({ redisUrl: redis.url, dataDir, maxEventsPerRun: 100, runView: tenfold(1) as never });
      await again.close();
      expect(await raw.get('runplane:runs-head:head-1'), 'indexing wrote it').to.equal('{"_v":1,' + JSON.stringify({ ...row('head-1', 20), tenant_id: 'heads' }).slice(1));
    } finally {
      await v1.close();
      await raw.close();
    }
  });

  it('keeps keyv\'s layout: a row keyv wrote is fenced by the script, and a row the script wrote reads back through keyv exactly', async () => {
    const awkward = { ...row('kv-1', 0), note: 'quotes " and \\ and ünïcode', big: 9007199254740991, frac: 0.1234567890123456, empty: [] as unknown[] };
    // written by keyv, as the previous release wrote every row
    await a.store<Row>('runs').set('kv-1', awkward);
    await a.atomic.claim('runner:kv-1', 'A', 60_000);
    expect(await b.runs<Row>().putIfLeased({ ...awkward, n: 1 }, 'runner:kv-1', 'A')).to.equal(true);
    expect(await b.runs<Row>().get('kv-1')).to.deep.equal({ ...awkward, n: 1 });
    expect(await a.store<Row>('runs').get('kv-1'), 'read back through keyv').to.deep.equal({ ...awkward, n: 1 });
    const raw = createClient({ url: redis.url });
    await raw.connect();
    try {
      expect(await raw.get('runplane:runs:kv-1')).to.equal(JSON.stringify({ value: { ...awkward, n: 1 } }));
      // a row that is not keyv's is an error, never taken for an unfinished run
      await raw.set('runplane:runs:kv-2', '{"not":"a row"}');
      let err: unknown;
      await b.runs<Row>().putUnlessEnded(row('kv-2', 1)).catch((e: unknown) => (err = e));
      expect(String(err)).to.match(/has no status/);
    } finally {
      await raw.close();
    }
  });
});
