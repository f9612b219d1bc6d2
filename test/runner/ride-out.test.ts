// A runner's writes ride out a store that cannot be reached for a moment: tried
// again only for errors that say so, only until the given deadline, never after
// shutdown; a fenced write past the lease makes the runner stop (runner_lost).
import { expect } from 'chai';
import { pino } from 'pino';
import { rideOut, ridingOut } from '../../gateway/runner/ride-out.ts';
import { Halt } from '../../gateway/runner/outcome.ts';
import type { RunnerStore } from '../../gateway/runner/executor.ts';
import type { RunRecord } from '../../gateway/runs/records.ts';

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
});
