// A runner's writes ride out a store that cannot be reached for a moment: tried
// again only for errors that say so, only until the given deadline, never after
// shutdown; a fenced write past the lease makes the runner stop (runner_lost); an
// event whose commit landed though its answer was lost is not appended again.
import { expect } from 'chai';
import { pino } from 'pino';
import { rideOut, ridingOut } from '../../gateway/runner/ride-out.ts';
import { Halt } from '../../gateway/runner/outcome.ts';
import type { RunnerStore } from '../../gateway/runner/deps.ts';
import type { RunRecord } from '../../gateway/runs/records.ts';
import { startGateway, newToken } from '../support/gateway.ts';

const log = pino({ level: 'silent' });
const down = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
const store = { unreachable: (err: unknown) => (err as { code?: string })?.code === 'ECONNREFUSED' };

/** A write that fails `n` times with `err`, then answers `value`. */
function failing<T>(n: number, err: () => Error, value: T) {
  let calls = 0;
  return {
    write: async () => {
      calls += 1;
      if (calls <= n) throw err();
      return value;
    },
    calls: () => calls,
  };
}

describe('runner: riding out an unreachable store', () => {
  it('tries a write again while the store is unreachable, and answers what it answered once back', async () => {
    const w = failing(2, down, 'ok');
    expect(await rideOut(store, 'a save', w.write, { until: () => Date.now() + 5000, log })).to.equal('ok');
    expect(w.calls()).to.equal(3);
  });

  it('never tries again an error that is not the store being away', async () => {
    const w = failing(1, () => new Error('duplicate key'), 'ok');
    const err = await rideOut(store, 'a save', w.write, { until: () => Date.now() + 5000, log }).catch((e: Error) => e);
    expect((err as Error).message).to.equal('duplicate key');
    expect(w.calls()).to.equal(1);
  });

  it('gives up at the deadline and at shutdown, with the store error', async () => {
    const w = failing(100, down, 'ok');
    const t0 = Date.now();
    const err = await rideOut(store, 'a save', w.write, { until: () => t0 + 700, log }).catch((e: Error) => e);
    expect((err as { code?: string }).code).to.equal('ECONNREFUSED');
    expect(Date.now() - t0).to.be.lessThan(1500);
    expect(w.calls()).to.be.within(2, 4);
    const w2 = failing(100, down, 'ok');
    await rideOut(store, 'the end', w2.write, { until: () => Infinity, stopped: () => true, log }).catch(() => undefined);
    expect(w2.calls(), 'not tried again once shutting down').to.equal(1);
  });

  it("stops a run's fenced writes with runner_lost once the lease is past, and passes a refusal through", async () => {
    let refused = false;
    const base = {
      ...store,
      save: async () => {
        if (refused) return false;
        throw down();
      },
    } as unknown as RunnerStore;
    const run = {} as RunRecord;
    const past = ridingOut(base, () => Date.now() - 1, log);
    const err = await past.save(run, 'me').catch((e: unknown) => e);
    expect(err).to.be.instanceOf(Halt);
    expect((err as Halt).haltClass).to.equal('runner_lost');
    refused = true;
    expect(await ridingOut(base, () => Date.now() + 5000, log).save(run, 'me'), 'a write the fence refused is not retried').to.equal(false);
  });

  it('appends an event once when its commit landed but the answer was lost with the connection (SQLite store of record)', async () => {
    const token = newToken();
    const gw = await startGateway({ keys: { [token]: { tenant_id: 'once' } } });
    try {
      const runs = gw.gateway.services.runs;
      const tenant = (await gw.gateway.services.tenants.resolve(token))!;
      const run = await runs.accept(tenant, { plan: { steps: [{ intent: 'wait', type: 'wait', seconds: 0 }], runtime: {} }, runtime: { compute_backend: 'dom_plane' }, detached: true } as never);
      expect(await runs.claimForRunner(run.run_id, 'runner-1', 60_000)).to.equal(true);
      // each write commits, then the connection drops before its answer, once per kind of write
      const lost = new Set<string>();
      const answerLost = <A extends unknown[], T>(kind: string, write: (...a: A) => Promise<T>) => async (...a: A): Promise<T> => {
        const answer = await write(...a);
        if (lost.has(kind)) return answer;
        lost.add(kind);
        throw Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
      };
      const flaky = Object.assign(Object.create(runs) as RunnerStore, {
        emit: answerLost('emit', runs.emit.bind(runs)),
        emitFenced: answerLost('emitFenced', runs.emitFenced.bind(runs)),
        saveAndEmit: answerLost('saveAndEmit', runs.saveAndEmit.bind(runs)),
      });
      const riding = ridingOut(flaky, () => Date.now() + 10_000, log);
      await riding.emit(run, 'run.status', { status: 'queued', phase: 'starting' });
      expect(await riding.emitFenced(run, 'runner-1', 'loop.started', { path: '0', loop_count: 2 })).to.equal(true);
      expect(await riding.saveAndEmit({ ...run, status: 'running' }, 'runner-1', 'step.started', { path: '0' })).to.equal(true);
      expect([...lost].sort(), 'every write lost its answer once').to.deep.equal(['emit', 'emitFenced', 'saveAndEmit']);
      const events = (await runs.history(run.run_id)).map((e) => `${e.type} ${JSON.stringify(e.data)}`);
      for (const event of ['run.status {"status":"queued","phase":"starting"}', 'loop.started {"path":"0","loop_count":2}', 'step.started {"path":"0"}']) {
        expect(events.filter((e) => e === event), `${event} in ${events.join(', ')}`).to.have.length(1);
      }
      // a write whose first try never reached the store is written on the next
      let first = true;
      const refusedFirst = Object.assign(Object.create(runs) as RunnerStore, {
        emitFenced: async (...a: Parameters<RunnerStore['emitFenced']>) => {
          if (first) {
            first = false;
            throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
          }
          return runs.emitFenced(...a);
        },
      });
      expect(await ridingOut(refusedFirst, () => Date.now() + 10_000, log).emitFenced(run, 'runner-1', 'loop.ended', { path: '0' })).to.equal(true);
      expect((await runs.history(run.run_id)).filter((e) => e.type === 'loop.ended')).to.have.length(1);
    } finally {
      await gw.close();
    }
  });
});
