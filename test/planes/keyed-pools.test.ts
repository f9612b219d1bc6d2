// The pools kept per key (dom_plane: per geo) with plain items: what is adopted comes
// back ready for the same key, at most `max` keys are kept (an idle one gives way,
// one with an item out never does), an idle key's items are disposed of, and close
// leaves nothing.
import { expect } from 'chai';
import { KeyedPools } from '../../agents/core/keyed-pools.ts';

interface Item {
  key: string;
  n: number;
}

function pools(max: number, idleMs: number) {
  let made = 0;
  const disposed: Item[] = [];
  const p = new KeyedPools<Item>(
    max,
    idleMs,
    async (key) => ({ key, n: ++made }),
    async (item) => void disposed.push(item),
  );
  return { p, disposed, made: () => made };
}

/** An item a session made, kept by `key`'s pool after the session. */
async function adopted(p: KeyedPools<Item>, key: string, n: number): Promise<Item> {
  const pool = p.poolFor(key)!;
  const item = { key, n };
  pool.adopt();
  await pool.giveBack(Promise.resolve(item));
  return item;
}

describe('keyed warm pools', () => {
  it('keeps an adopted item for the next borrow of its key, and only of its key', async () => {
    const { p, disposed } = pools(2, 60_000);
    try {
      expect(p.poolFor('Europe/Berlin|de-DE')!.borrow()).to.equal(undefined);
      const own = await adopted(p, 'Europe/Berlin|de-DE', 100);
      expect(p.readyByKey()).to.deep.equal({ 'Europe/Berlin|de-DE': 1 });
      expect(p.poolFor('Asia/Tokyo|ja-JP')!.borrow()).to.equal(undefined);
      expect(p.poolFor('Europe/Berlin|de-DE')!.borrow()).to.equal(own);
      expect(disposed).to.deep.equal([]);
    } finally {
      await p.close();
    }
  });

  it('makes room by closing the least recently used idle key, never one with an item out', async () => {
    const { p, disposed } = pools(2, 60_000);
    try {
      await adopted(p, 'a', 1);
      p.poolFor('b')!.adopt(); // out with a session
      expect(p.poolFor('c'), 'a gave way').to.not.equal(undefined);
      await new Promise((r) => setTimeout(r, 50));
      expect(disposed.map((i) => i.key)).to.deep.equal(['a']);
      expect(Object.keys(p.readyByKey()).sort()).to.deep.equal(['b', 'c']);
      // b has an item out and c was used last: no room for d, whose session gets a browser of its own
      const c = p.poolFor('c')!;
      c.adopt();
      expect(p.poolFor('d')).to.equal(undefined);
    } finally {
      await p.close();
    }
  });

  it('closes a key nobody borrowed from for the idle time, and max 0 keeps none', async () => {
    const { p, disposed } = pools(2, 1000);
    try {
      await adopted(p, 'a', 1);
      const deadline = Date.now() + 5000;
      while (Object.keys(p.readyByKey()).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(p.readyByKey()).to.deep.equal({});
      await new Promise((r) => setTimeout(r, 50));
      expect(disposed.map((i) => i.key)).to.deep.equal(['a']);
    } finally {
      await p.close();
    }
    // a session longer than the idle time: its item comes back to a pool that is still there
    const long = pools(2, 3000);
    try {
      const pool = long.p.poolFor('b')!;
      pool.adopt();
      await new Promise((r) => setTimeout(r, 4000));
      await pool.giveBack(Promise.resolve({ key: 'b', n: 2 }));
      // a sweep (every 1.5 s) passes after the return
      await new Promise((r) => setTimeout(r, 1600));
      expect(long.p.readyByKey()).to.deep.equal({ b: 1 });
      expect(long.disposed).to.deep.equal([]);
    } finally {
      await long.p.close();
    }
    const none = pools(0, 1000);
    expect(none.p.poolFor('a')).to.equal(undefined);
    await none.p.close();
  });

  it('disposes of every ready item at close, and of one given back after it', async () => {
    const { p, disposed } = pools(2, 60_000);
    await adopted(p, 'a', 1);
    const b = p.poolFor('b')!;
    b.adopt();
    await p.close();
    await b.giveBack(Promise.resolve({ key: 'b', n: 2 }));
    expect(disposed.map((i) => i.key).sort()).to.deep.equal(['a', 'b']);
  });
});
