import { expect } from 'chai';
import { batchOf } from '../../sdk/stream-batch.ts';
import type { Pending } from '../../sdk/stream-types.ts';

const ev = (step: number | null, kind: string): Pending => ({
  kind: 'events',
  method: 'POST',
  path: '/runs/r1/events',
  body: { events: [{ layer: 'planner', kind, step_index: step }], ...(step === null ? {} : { step_index: step }) },
  tries: 0,
});
const step = (i: number): Pending => ({ kind: 'step', method: 'PUT', path: `/runs/r1/steps/${i}`, body: () => ({ step_index: i, step_id: `s${i}` }), tries: 0 });
const shot = (i: number): Pending => ({ kind: 'screenshot', method: 'POST', path: `/runs/r1/screenshots/${i}/post`, image: Buffer.from([i]), tries: 0 });
const bodyOf = (j: Pending) => (typeof j.body === 'function' ? (j.body as () => unknown)() : j.body);

describe('trace SDK: what a batch request carries', () => {
  it("folds a step's consecutive events into one record, in order, and nothing else", () => {
    const jobs = [step(0), ev(0, 'a'), ev(0, 'b'), ev(1, 'c'), ev(null, 'd'), ev(null, 'e'), step(1), ev(1, 'f'), ev(1, 'g')];
    const before = JSON.stringify(jobs.map((j) => j.body));
    const { requests, owners, parts } = batchOf(jobs, bodyOf);
    expect(requests.map((r) => [r.path.split('/').pop(), (r.body as { events?: Array<{ kind: string }> }).events?.map((e) => e.kind) ?? null])).to.deep.equal([
      ['0', null], ['events', ['a', 'b']], ['events', ['c']], ['events', ['d', 'e']], ['1', null], ['events', ['f', 'g']],
    ]);
    expect(requests.map((r) => (r.body as { step_index?: number }).step_index ?? null)).to.deep.equal([0, 0, 1, null, 1, 1]);
    // every job is answered by the request that carried it
    expect(owners.map((o) => o.length)).to.deep.equal([1, 2, 1, 2, 1, 2]);
    expect(owners.flat()).to.deep.equal(jobs);
    expect(JSON.stringify(jobs.map((j) => j.body)), 'the jobs keep their own bodies (the drop ledger may hold them)').to.equal(before);
    expect(parts).to.equal(undefined);
  });

  it('names each screenshot by its part in a multipart batch', () => {
    const { requests, owners, parts } = batchOf([shot(3), shot(4)], bodyOf);
    expect(requests).to.deep.equal([
      { method: 'POST', path: '/runs/r1/screenshots/3/post', image: 'image0' },
      { method: 'POST', path: '/runs/r1/screenshots/4/post', image: 'image1' },
    ]);
    expect(owners.map((o) => o.length)).to.deep.equal([1, 1]);
    expect(parts!.map((p) => [p.field, p.filename ?? null, p.type])).to.deep.equal([['requests', null, 'application/json'], ['image0', '3_post.png', 'image/png'], ['image1', '4_post.png', 'image/png']]);
    expect(JSON.parse(Buffer.from(parts![0]!.data).toString())).to.deep.equal({ requests });
  });
});
