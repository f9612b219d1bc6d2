import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { RedisEventLog, type RunEvent } from '../../gateway/runs/events.ts';
import { watch } from '../../gateway/runs/watch.ts';
import { startRedis, type RedisHandle } from '../support/redis.ts';
import { sleep } from '../support/gateway.ts';

// Two replicas append to one run at the same time (the runner on one, a cancel
// from an edge replica on another): the seq must be taken in the same step as
// the append, so the log is dense and in order and no watcher drops a late event.
describe('run events on Redis: two appenders on one run', function () {
  this.timeout(60_000);
  let redis: RedisHandle;
  let a: RedisEventLog;
  let b: RedisEventLog;
  let c: RedisEventLog;

  before(async () => {
    redis = await startRedis();
    [a, b, c] = await Promise.all([RedisEventLog.open(redis.url), RedisEventLog.open(redis.url), RedisEventLog.open(redis.url)]);
  });
  after(async () => {
    await Promise.all([a, b, c].map((l) => l?.close()));
    await redis?.stop();
  });

  async function until(cond: () => boolean, ms: number): Promise<void> {
    const end = Date.now() + ms;
    while (!cond() && Date.now() < end) await sleep(20);
  }

  it('keeps the log dense 1..N and in seq order, and every watcher on a third replica gets every event in order', async () => {
    const runId = randomUUID();
    const perReplica = 300;
    const n = 2 * perReplica;
    const raw: RunEvent[] = [];
    const unsubscribe = c.subscribe(`run:${runId}`, (e) => raw.push(e));
    const watched: RunEvent[] = [];
    const w = await watch(c, { topic: `run:${runId}`, runId, after: 0, send: (e) => watched.push(e) });

    const appended: RunEvent[] = [];
    const burst = (log: RedisEventLog, who: string) =>
      Array.from({ length: perReplica }, (_, i) =>
        log.append({ run_id: runId, tenant_id: 't1', type: 'step.finished', data: { who, i, note: 'quotes " and \\ and ünïcode' } }).then((e) => appended.push(e)),
      );
    // interleave the two replicas' appends
    const pending: Promise<unknown>[] = [];
    const pa = burst(a, 'a');
    const pb = burst(b, 'b');
    for (let i = 0; i < perReplica; i++) pending.push(pa[i]!, pb[i]!);
    await Promise.all(pending);
    await until(() => raw.length >= n && watched.length >= n, 10_000);
    unsubscribe();
    w.stop();

    const seqs = (xs: RunEvent[]) => xs.map((e) => e.seq);
    const dense = Array.from({ length: n }, (_, i) => i + 1);
    // each append returned a distinct seq, and together they are 1..N
    expect([...seqs(appended)].sort((x, y) => x - y)).to.deep.equal(dense);
    // the stored log (what SSE Last-Event-ID and WebSocket ?after= replay from, on any replica)
    const history = await c.history(runId);
    expect(seqs(history)).to.deep.equal(dense);
    expect(history.filter((e) => e.data.who === 'a')).to.have.length(perReplica);
    expect(history.find((e) => e.data.who === 'b' && e.data.i === 7)?.data.note).to.equal('quotes " and \\ and ünïcode');
    // a resume from the middle sees exactly the rest
    expect(seqs(await b.history(runId, 250))).to.deep.equal(dense.slice(250));
    // live delivery on a third replica: in seq order, none missing
    expect(seqs(raw)).to.deep.equal(dense);
    expect(seqs(watched)).to.deep.equal(dense);
    // what append returned is what was stored
    const stored = new Map(history.map((e) => [e.seq, e]));
    for (const e of appended) expect(stored.get(e.seq)).to.deep.equal(e);
  });

  it('reloads its script when Redis forgot it (SCRIPT FLUSH, a Redis restart)', async () => {
    const runId = randomUUID();
    await a.append({ run_id: runId, tenant_id: 't1', type: 'run.status', data: {} });
    const { createClient } = await import('@redis/client');
    const admin = createClient({ url: redis.url });
    await admin.connect();
    await admin.scriptFlush();
    await admin.close();
    const e = await a.append({ run_id: runId, tenant_id: 't1', type: 'run.ended', data: { status: 'succeeded' } });
    expect(e.seq).to.equal(2);
    expect((await b.history(runId)).map((x) => x.type)).to.deep.equal(['run.status', 'run.ended']);
  });
});
