// GET /v1/runs/{id}/status reads only the status fields of a run (RunTable.pick),
// not its steps and logs: the body must still be exactly what the full record
// says, on the suite's store (SQLite, or PostgreSQL with RUNPLANE_TEST_STORE),
// and another tenant's run is still 404.
import { expect } from 'chai';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newToken, startGateway, step, type TestGateway } from '../support/gateway.ts';
import { openDb } from '../../gateway/state/sqlite/db.ts';
import { SqliteRunTable } from '../../gateway/state/sqlite/tables.ts';
import { STATUS_KEYS } from '../../gateway/runs/records.ts';
import type { RunKey } from '../../gateway/state/tables.ts';

describe('the status route reads a projection of the run', () => {
  let gw: TestGateway;
  const acme = newToken();
  const other = newToken();

  before(async () => {
    gw = await startGateway({ keys: { [acme]: { tenant_id: 'acme' }, [other]: { tenant_id: 'other' } } });
  });
  after(async () => {
    await gw?.close();
  });

  const fields = (b: Record<string, unknown>) => Object.fromEntries(['run_id', 'status', 'created_at', ...STATUS_KEYS].map((k) => [k, b[k]]));

  it('answers the same body as the full record, queued and after a cancel (failure_help, halt_class, ended_at set)', async () => {
    const r = await gw.req('POST', '/v1/predict', { token: acme, body: { plan: [step()], detached: true } });
    expect(r.status, r.text).to.equal(200);
    const id = r.body.run_id as string;
    for (const when of ['queued', 'cancelled']) {
      if (when === 'cancelled') expect((await gw.req('POST', `/v1/runs/${id}/cancel`, { token: acme })).status).to.equal(200);
      const s = await gw.req('GET', `/v1/runs/${id}/status`, { token: acme });
      const full = await gw.req('GET', `/v1/runs/${id}`, { token: acme });
      expect(s.status, s.text).to.equal(200);
      expect(s.body.status).to.equal(when);
      expect(Object.keys(s.body).sort()).to.deep.equal(['created_at', 'ended_at', 'failure_help', 'halt_class', 'phase', 'run_id', 'status', 'updated_at']);
      expect(s.body).to.deep.equal(fields(full.body as Record<string, unknown>));
    }
    const s = await gw.req('GET', `/v1/runs/${id}/status`, { token: acme });
    expect(s.body.failure_help, 'an object, not its JSON text').to.be.an('object');
    expect((await gw.req('GET', `/v1/runs/${id}/status`, { token: other })).status, "another tenant's run").to.equal(404);
    expect((await gw.req('GET', '/v1/runs/00000000-0000-4000-8000-000000000000/status', { token: acme })).status).to.equal(404);
  });

  it('on SQLite keeps JSON types (true, numbers, objects, null) and answers null for a key the body lacks', async () => {
    const db = openDb(path.join(await mkdtemp(path.join(tmpdir(), 'runplane-pick-')), 'runplane.db'));
    try {
      type Row = RunKey & { flag: boolean; n: number; obj: { a: number[] }; none: null; missing?: string };
      const table = new SqliteRunTable<Row>(db);
      await table.put({ run_id: 'r1', tenant_id: 't', status: 'queued', created_at: '2026-01-01T00:00:00.000Z', flag: true, n: 1.5, obj: { a: [1] }, none: null });
      expect(await table.pick('r1', ['flag', 'n', 'obj', 'none', 'missing'])).to.deep.equal({ run_id: 'r1', tenant_id: 't', status: 'queued', created_at: '2026-01-01T00:00:00.000Z', flag: true, n: 1.5, obj: { a: [1] }, none: null, missing: null });
      expect(await table.pick('nope', ['flag'])).to.equal(undefined);
      const refused = await table.pick('r1', ["x') --" as 'flag']).then(
        () => undefined,
        (err: Error) => err.message,
      );
      expect(refused, 'a key is never spliced into SQL unchecked').to.match(/not a run record key/);
    } finally {
      db.close();
    }
  });
});
