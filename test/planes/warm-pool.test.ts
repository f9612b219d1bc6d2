// The agents' warm pool with plain items: a borrow that comes while an item is being
// made or given back waits for that item (dom_plane: the browser being renewed after
// the session before), and only while one is coming.
import { expect } from 'chai';
import { WarmPool } from '../../agents/core/pool.ts';

interface Item {
  n: number;
}

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: Error) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

async function readyPool(): Promise<{ pool: WarmPool<Item>; made: () => number; disposed: Item[] }> {
  let made = 0;
  const disposed: Item[] = [];
  const pool = new WarmPool<Item>(1, async () => ({ n: ++made }), async (i) => void disposed.push(i));
  pool.fill();
  while (pool.readyCount === 0) await new Promise((r) => setTimeout(r, 1));
  return { pool, made: () => made, disposed };
}

/** A pool whose one item was lent and is being given back now, its renewal settled by the test. */
async function renewing() {
  const ready = await readyPool();
  const first = ready.pool.borrow()!;
  const renewal = deferred<Item | undefined>();
  const back = ready.pool.giveBack(renewal.promise);
  return { ...ready, first, renewal, back };
}

describe('warm pool: borrowSoon', () => {
  it('waits for the item being given back, and takes that one', async () => {
    const { pool, made, first, renewal, back } = await renewing();
    let got: Item | undefined | 'pending' = 'pending';
    const borrowed = pool.borrowSoon(5000).then((i) => (got = i));
    await new Promise((r) => setTimeout(r, 20));
    expect(got, 'no item is ready while the last one is renewed').to.equal('pending');
    renewal.resolve(first);
    await borrowed;
    await back;
    expect(got).to.equal(first);
    expect(made(), 'no second item was made beside it').to.equal(1);
    await pool.close();
  });

  it('waits for the fresh item made after a renewal failed', async () => {
    const { pool, made, renewal, back } = await renewing();
    const borrowed = pool.borrowSoon(5000);
    renewal.reject(new Error('the context could not be made'));
    const got = await borrowed;
    await back;
    expect(got).to.deep.equal({ n: 2 });
    expect(made()).to.equal(2);
    await pool.close();
  });

  it('answers at once when nothing is coming, and gives up after its wait', async () => {
    const { pool } = await readyPool();
    pool.borrow();
    const t0 = Date.now();
    expect(await pool.borrowSoon(5000), 'nothing ready, nothing made or given back').to.equal(undefined);
    expect(Date.now() - t0).to.be.lessThan(100);
    const renewal = deferred<Item | undefined>();
    const back = pool.giveBack(renewal.promise);
    const t1 = Date.now();
    expect(await pool.borrowSoon(50), 'a renewal that takes longer than the wait').to.equal(undefined);
    expect(Date.now() - t1).to.be.within(40, 1000);
    renewal.resolve({ n: 1 });
    await back;
    expect(pool.readyCount, 'the late item is still kept for the next session').to.equal(1);
    await pool.close();
  });

  it('wakes a waiting borrow when the pool closes', async () => {
    const { pool, disposed, renewal, back } = await renewing();
    const borrowed = pool.borrowSoon(60_000);
    const closing = pool.close();
    expect(await borrowed).to.equal(undefined);
    renewal.resolve({ n: 1 });
    await back;
    await closing;
    expect(disposed).to.deep.equal([{ n: 1 }]);
  });
});
