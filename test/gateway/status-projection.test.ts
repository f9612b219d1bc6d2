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
import { SqliteEventTable, SqliteRunTable } from '../../gateway/state/sqlite/tables.ts';
import { SqliteAtomicOps } from '../../gateway/state/sqlite/atomic.ts';
import { openPool } from '../../gateway/state/pg/db.ts';
import { PgAtomicOps } from '../../gateway/state/pg/atomic.ts';
import { PgEventTable, PgRunTable } from '../../gateway/state/pg/tables.ts';
import { STATUS_KEYS } from '../../gateway/runs/records.ts';
import { outboxItem } from '../../gateway/runs/webhooks.ts';
import type { AtomicOps } from '../../gateway/state/atomic.ts';
import type { EventTable, RunKey, RunTable } from '../../gateway/state/tables.ts';
import { startPostgres } from '../support/postgres.ts';

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

  describe("keeps the head a poll reads in step with every write of the row", () => {
    type Row = RunKey & { phase: string; halt_class: string | null; failure_help: { checks: string[] } | null; updated_at: string; ended_at: string | null; steps: number[] };
    const row = (id: string, status: string, n: number, ended = false): Row => ({
      run_id: id,
      tenant_id: 't',
      status,
      created_at: '2026-01-01T00:00:00.000Z',
      phase: ended ? 'done' : `step ${n}`,
      halt_class: ended ? 'timeout' : null,
      failure_help: ended ? { checks: [`check ${n}`] } : null,
      updated_at: `2026-01-01T00:00:${String(n).padStart(2, '0')}.000Z`,
      ended_at: ended ? `2026-01-01T00:01:${String(n).padStart(2, '0')}.000Z` : null,
      steps: Array.from({ length: n }, (_, i) => i),
    });
    const expected = (r: Row) => ({ run_id: r.run_id, tenant_id: r.tenant_id, status: r.status, created_at: r.created_at, phase: r.phase, halt_class: r.halt_class, failure_help: r.failure_help, updated_at: r.updated_at, ended_at: r.ended_at });

    /** Each way a row is written, then a refused ending, then a row whose head is gone (written before the column came). */
    async function everyWrite(runs: RunTable<Row>, events: EventTable, atomic: AtomicOps, dropHead: (id: string) => Promise<void>) {
      const id = 'head-1';
      const seen = async (r: Row, how: string) => expect(await runs.pick(id, STATUS_KEYS), how).to.deep.equal(expected(r));
      let last = row(id, 'queued', 1);
      await runs.put(last);
      await seen(last, 'put');
      last = row(id, 'running', 2);
      await events.appendWithRun(last, { type: 'run.status' });
      await seen(last, 'appendWithRun');
      last = row(id, 'running', 3);
      expect(await runs.putUnlessEnded(last)).to.equal(true);
      await seen(last, 'putUnlessEnded');
      expect(await atomic.claim('lease:head-1', 'owner', 60_000)).to.equal(null);
      last = row(id, 'running', 4);
      expect(await runs.putIfLeased(last, 'lease:head-1', 'owner')).to.equal(true);
      await seen(last, 'putIfLeased');
      last = row(id, 'running', 5);
      expect(await events.appendIfLeased(last, 'lease:head-1', 'owner', { type: 'step.finished' })).to.not.equal(null);
      await seen(last, 'appendIfLeased');
      expect(await runs.putIfLeased(row(id, 'running', 6), 'lease:head-1', 'someone else'), 'a lost lease writes nothing').to.equal(false);
      await seen(last, 'a refused fenced write');
      const ending = row(id, 'failed', 7, true);
      expect(await events.appendIfUnended(ending, { type: 'run.ended' }, outboxItem(id, { url: 'http://127.0.0.1:9/hook' } as never, { run_id: id }))).to.not.equal(null);
      await seen(ending, 'appendIfUnended');
      expect(await events.appendIfUnended(row(id, 'cancelled', 8, true), { type: 'run.ended' }), 'a second ending').to.equal(null);
      expect(await runs.putUnlessEnded(row(id, 'running', 9))).to.equal(false);
      await seen(ending, 'refused writes after the end');
      await dropHead(id);
      await seen(ending, 'a row with no head: its body answers');
      expect(await runs.pick('nope', STATUS_KEYS)).to.equal(undefined);
    }

    it('on SQLite', async () => {
      const db = openDb(path.join(await mkdtemp(path.join(tmpdir(), 'runplane-head-')), 'runplane.db'));
      try {
        await everyWrite(new SqliteRunTable<Row>(db), new SqliteEventTable(db, 1000), new SqliteAtomicOps(db), async (id) => {
          db.prepare('UPDATE runs SET head = NULL WHERE run_id = ?').run(id);
        });
      } finally {
        db.close();
      }
    });

    it('on SQLite, a database from before the head column: the migration adds it, its rows are read from their body until written', async () => {
      const file = path.join(await mkdtemp(path.join(tmpdir(), 'runplane-head-old-')), 'runplane.db');
      const first = openDb(file);
      const old = row('old-1', 'failed', 3, true);
      await new SqliteRunTable<Row>(first).put(old);
      // as the version before it left the file: no head column, migration 3 not applied
      first.exec('ALTER TABLE runs DROP COLUMN head; DELETE FROM schema_migrations WHERE version = 3');
      first.close();
      const db = openDb(file);
      try {
        expect((db.prepare('SELECT version FROM schema_migrations ORDER BY version').all() as Array<{ version: number }>).map((r) => r.version)).to.deep.equal([1, 2, 3]);
        expect(db.prepare('SELECT head FROM runs WHERE run_id = ?').get('old-1')).to.deep.equal({ head: null });
        const runs = new SqliteRunTable<Row>(db);
        expect(await runs.pick('old-1', STATUS_KEYS)).to.deep.equal(expected(old));
        const next = row('old-1', 'failed', 4, true);
        await runs.put(next);
        expect(db.prepare('SELECT head FROM runs WHERE run_id = ?').get('old-1')).to.not.deep.equal({ head: null });
        expect(await runs.pick('old-1', STATUS_KEYS)).to.deep.equal(expected(next));
      } finally {
        db.close();
      }
    });

    it('on PostgreSQL', async function () {
      this.timeout(60_000);
      const pg = await startPostgres();
      const pool = await openPool(pg.url);
      try {
        await everyWrite(new PgRunTable<Row>(pool), new PgEventTable(pool, 1000), new PgAtomicOps(pool), async (id) => {
          await pool.query('UPDATE runs SET head = NULL WHERE run_id = $1', [id]);
        });
      } finally {
        await pool.end();
        await pg.stop();
      }
    });
  });
});
