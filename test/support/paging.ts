// The runs list contract every run table keeps: a tenant's runs newest first
// (created_at, then run_id), a page at a time through an opaque cursor, with
// an optional status, exactly as `pageOf` pages them in memory.
import { expect } from 'chai';
import { BadCursor, pageOf, type RunKey, type RunTable } from '../../gateway/state/tables.ts';

export type PagedRow = RunKey & { n: number };

/** 25 runs of two tenants and two statuses; pairs share a timestamp, so run_id (mixed case) breaks the tie. */
export function pagingRuns(): PagedRow[] {
  return Array.from({ length: 25 }, (_, i) => ({
    run_id: `run-${i % 2 ? 'B' : 'a'}${String(i).padStart(2, '0')}`,
    tenant_id: i % 5 === 4 ? 'beta' : 'alpha',
    status: i % 3 === 0 ? 'failed' : 'succeeded',
    created_at: new Date(Date.UTC(2026, 0, 1, 0, 0, Math.floor(i / 2))).toISOString(),
    n: i,
  }));
}

/** Walks tenant alpha's pages for each status and limit and checks each against pageOf; a forged cursor is BadCursor. */
export async function expectPagesAsPageOf(runs: Pick<RunTable<PagedRow, RunKey>, 'page'>, all: PagedRow[], o: { statuses: Array<string | undefined>; limits: number[] }): Promise<void> {
  for (const status of o.statuses) {
    for (const limit of o.limits) {
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await runs.page('alpha', { limit, cursor, status });
        expect(page.items.map((r) => r.run_id)).to.deep.equal(pageOf(all, 'alpha', { limit, cursor, status }).items.map((r) => r.run_id));
        seen.push(...page.items.map((r) => r.run_id));
        cursor = page.next_cursor ?? undefined;
      } while (cursor);
      expect(seen.length).to.equal(all.filter((r) => r.tenant_id === 'alpha' && (!status || r.status === status)).length);
    }
  }
  let err: unknown;
  await runs.page('alpha', { limit: 5, cursor: 'forged' }).catch((e: unknown) => (err = e));
  expect(err).to.be.instanceOf(BadCursor);
}
