// Issue 13: the ingest write queue gives each record category only its share
// (events half, screenshots and model io a quarter each), so screenshots piling
// up are refused (429 naming the category, scope queue) while step records
// still find room up to the total.
import { expect } from 'chai';
import { IngestError } from '../../plugins/trace-ingest/http.ts';
import { WriteQueue } from '../../plugins/trace-ingest/write-queue.ts';
import type { RecordCategory } from '../../sdk/categories.ts';

describe('trace ingest write queue shares per category', () => {
  it('refuses screenshots past their quarter while step records still get the rest', async () => {
    const q = new WriteQueue(8);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const queue = (category: RecordCategory, i: number) => q.run(`run-${category}-${i}`, () => gate, { category });
    const pending: Promise<void>[] = [];
    pending.push(queue('screenshot', 0), queue('screenshot', 1));
    let refused: unknown;
    try {
      await queue('screenshot', 2);
    } catch (err) {
      refused = err;
    }
    expect(refused).to.be.instanceOf(IngestError);
    expect((refused as IngestError).status).to.equal(429);
    expect((refused as IngestError).headers).to.include({ 'Retry-After': '1', 'X-Trace-Rate-Limits': '1:screenshot:queue' });
    for (let i = 0; i < 6; i++) pending.push(queue('step', i));
    expect(q.depth).to.equal(8);
    expect(() => queue('step', 6), 'the total cap still holds').to.throw(IngestError, /saturated/);
    // the metric's label says which share was full
    expect(Object.fromEntries(q.rejected)).to.deep.equal({ screenshot: 1, all: 1 });
    release();
    await Promise.all(pending);
    expect(q.depth).to.equal(0);
    expect(q.depthBy.get('screenshot')).to.equal(0);
    await queue('screenshot', 3);
  });
});
