// A status poll, GET /v1/runs/{id} and a runs list read a run's view (RunTable.view: its
// lifecycle body, kept in the row's head), not its steps and logs: the bodies must still be
// exactly what the full record says, on the suite's store (SQLite, or PostgreSQL with
// RUNPLANE_TEST_STORE), and another tenant's run is still 404.
import { expect } from 'chai';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newToken, startGateway, step, type TestGateway } from '../support/gateway.ts';
import { openDb, type Db } from '../../gateway/state/sqlite/db.ts';
import { SqliteEventTable, SqliteRunTable } from '../../gateway/state/sqlite/tables.ts';
import { SqliteAtomicOps } from '../../gateway/state/sqlite/atomic.ts';
import { openPool } from '../../gateway/state/pg/db.ts';
import { PgAtomicOps } from '../../gateway/state/pg/atomic.ts';
import { PgEventTable, PgRunTable } from '../../gateway/state/pg/tables.ts';
import { RUN_VIEW, lifecycleBody, lifecycleOf, type RunRecord } from '../../gateway/runs/records.ts';
import { outboxItem } from '../../gateway/runs/webhooks.ts';
import type { AtomicOps } from '../../gateway/state/atomic.ts';
import type { EventTable, RunKey, RunTable, RunView } from '../../gateway/state/tables.ts';
import { startPostgres } from '../support/postgres.ts';

describe('the status, lifecycle and list routes read a view of the run', () => {
  let gw: TestGateway;
  const acme = newToken();
  const other = newToken();

  before(async () => {
    gw = await startGateway({ keys: { [acme]: { tenant_id: 'acme' }, [other]: { tenant_id: 'other' } } });
  });
  after(async () => {
    await gw?.close();
  });

  const STATUS_FIELDS = ['run_id', 'status', 'created_at', 'phase', 'halt_class', 'failure_help', 'updated_at', 'ended_at'];
  const fields = (b: Record<string, unknown>) => Object.fromEntries(STATUS_FIELDS.map((k) => [k, b[k]]));
  const record = (id: string) => gw.gateway.services.state.runs<RunRecord>().get(id) as Promise<RunRecord>;

  it('answers the same bodies as the full record, queued and after a cancel (failure_help, halt_class, ended_at set)', async () => {
    const r = await gw.req('POST', '/v1/predict', { token: acme, body: { plan: [step(), step(), step()], detached: true } });
    expect(r.status, r.text).to.equal(200);
    const id = r.body.run_id as string;
    for (const when of ['queued', 'cancelled']) {
      if (when === 'cancelled') expect((await gw.req('POST', `/v1/runs/${id}/cancel`, { token: acme })).status).to.equal(200);
      const s = await gw.req('GET', `/v1/runs/${id}/status`, { token: acme });
      const full = await gw.req('GET', `/v1/runs/${id}`, { token: acme });
      const list = await gw.req('GET', '/v1/runs?limit=100', { token: acme });
      expect(s.status, s.text).to.equal(200);
      expect(s.body.status).to.equal(when);
      expect(Object.keys(s.body).sort()).to.deep.equal([...STATUS_FIELDS].sort());
      expect(s.body).to.deep.equal(fields(full.body as Record<string, unknown>));
      // JSON round trip: what the route sends of the record itself
      expect(full.body, 'GET /v1/runs/{id}').to.deep.equal(JSON.parse(JSON.stringify(lifecycleBody(await record(id)))));
      expect(full.body).to.include({ step_count: 3 });
      expect((list.body.runs as Array<{ run_id: string }>).find((x) => x.run_id === id), 'its list item').to.deep.equal(full.body);
    }
    const s = await gw.req('GET', `/v1/runs/${id}/status`, { token: acme });
    expect(s.body.failure_help, 'an object, not its JSON text').to.be.an('object');
    for (const route of ['/status', '']) {
      expect((await gw.req('GET', `/v1/runs/${id}${route}`, { token: other })).status, `another tenant's run (${route || 'lifecycle'})`).to.equal(404);
      expect((await gw.req('GET', `/v1/runs/00000000-0000-4000-8000-000000000000${route}`, { token: acme })).status).to.equal(404);
    }
    expect(((await gw.req('GET', '/v1/runs', { token: other })).body.runs as unknown[]).length, "another tenant's list").to.equal(0);
  });

  it('RUN_VIEW is the lifecycle body with the tenant, and lifecycleOf takes the tenant off again', async () => {
    const r = await gw.req('POST', '/v1/predict', { token: acme, body: { plan: [step()], detached: true } });
    const rec = await record(r.body.run_id as string);
    const v = RUN_VIEW.of(rec);
    expect(v.tenant_id).to.equal('acme');
    expect(lifecycleOf(v)).to.deep.equal(lifecycleBody(rec));
    expect(lifecycleOf(v)).to.not.have.property('tenant_id');
  });

  describe('keeps the head a view reads in step with every write of the row', () => {
    type Row = RunKey & { phase: string; halt_class: string | null; failure_help: { checks: string[]; flag: boolean; n: number } | null; updated_at: string; ended_at: string | null; steps: number[] };
    type View = RunKey & { phase: string; failure_help: Row['failure_help']; ended_at: string | null; step_count: number };
    const VIEW: RunView<Row, View> = {
      version: 1,
      of: (r) => ({ run_id: r.run_id, tenant_id: r.tenant_id, status: r.status, created_at: r.created_at, phase: r.phase, failure_help: r.failure_help, ended_at: r.ended_at, step_count: r.steps.length }),
    };
    /** the same rows seen by a later version of the code, whose view changed */
    const VIEW_2: RunView<Row, View> = { version: 2, of: (r) => ({ ...VIEW.of(r), phase: r.phase.toUpperCase() }) };
    const row = (id: string, status: string, n: number, ended = false): Row => ({
      run_id: id,
      tenant_id: 't',
      status,
      created_at: '2026-01-01T00:00:00.000Z',
      phase: ended ? 'done' : `step ${n}`,
      halt_class: ended ? 'timeout' : null,
      failure_help: ended ? { checks: [`check ${n}`], flag: true, n: 1.5 } : null,
      updated_at: `2026-01-01T00:00:${String(n).padStart(2, '0')}.000Z`,
      ended_at: ended ? `2026-01-01T00:01:${String(n).padStart(2, '0')}.000Z` : null,
      steps: Array.from({ length: n }, (_, i) => i),
    });

    interface Tables {
      runs: RunTable<Row, View>;
      events: EventTable;
      atomic: AtomicOps;
      /** runs one statement with `?` placeholders */
      sql(q: string, ...params: string[]): Promise<void>;
    }

    /** Each way a row is written; refused writes; then the head alone, no head, a stale head and a newer view. */
    async function everyWrite(open: (view: RunView<Row, View>) => Tables) {
      const { runs, events, atomic, sql } = open(VIEW);
      const id = 'head-1';
      const seen = async (r: Row, how: string, view = VIEW, table = runs) => {
        expect(await table.view(id), how).to.deep.equal(view.of(r));
        expect((await table.page('t', { limit: 10 })).items, `${how}: the list`).to.deep.equal([view.of(r)]);
      };
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
      await seen(ending, 'appendIfUnended (JSON types kept: true, numbers, objects, null)');
      expect(await events.appendIfUnended(row(id, 'cancelled', 8, true), { type: 'run.ended' }), 'a second ending').to.equal(null);
      expect(await runs.putUnlessEnded(row(id, 'running', 9))).to.equal(false);
      await seen(ending, 'refused writes after the end');
      await sql('UPDATE runs SET body = ? WHERE run_id = ?', 'not JSON', id);
      await seen(ending, 'a current head: the body is not read');
      await sql('UPDATE runs SET body = ?, head = NULL WHERE run_id = ?', JSON.stringify(ending), id);
      await seen(ending, 'a row with no head (written before heads): its body answers');
      await sql('UPDATE runs SET head = ? WHERE run_id = ?', JSON.stringify({ _v: 0, ...VIEW.of(ending), phase: 'stale' }), id);
      await seen(ending, 'a head of an older view: its body answers');
      await sql('UPDATE runs SET head = ? WHERE run_id = ?', JSON.stringify({ run_id: id, tenant_id: 't', status: 'failed', created_at: ending.created_at, phase: 'stale' }), id);
      await seen(ending, 'a head from before views had versions (five status fields): its body answers');
      await runs.put(ending);
      const later = open(VIEW_2).runs;
      await seen(ending, 'a newer view reads the body until the next write', VIEW_2, later);
      await later.put(ending);
      await sql('UPDATE runs SET body = ? WHERE run_id = ?', 'not JSON', id);
      await seen(ending, 'and then its own head', VIEW_2, later);
      expect(await runs.view('nope')).to.equal(undefined);
    }

    it('on SQLite', async () => {
      const db = openDb(path.join(await mkdtemp(path.join(tmpdir(), 'runplane-head-')), 'runplane.db'));
      try {
        await everyWrite((view) => ({
          runs: new SqliteRunTable<Row, View>(db, view),
          events: new SqliteEventTable(db, 1000, view),
          atomic: new SqliteAtomicOps(db),
          sql: async (q, ...params) => void db.prepare(q).run(...params),
        }));
      } finally {
        db.close();
      }
    });

    it('on SQLite, a database from before the head column: the migration adds it, its rows are read from their body until written', async () => {
      const file = path.join(await mkdtemp(path.join(tmpdir(), 'runplane-head-old-')), 'runplane.db');
      const first = openDb(file);
      const old = row('old-1', 'failed', 3, true);
      await new SqliteRunTable<Row, View>(first, VIEW).put(old);
      // as the version before it left the file: no head column, migrations 3 and 4 not applied
      first.exec('ALTER TABLE runs DROP COLUMN head; DELETE FROM schema_migrations WHERE version >= 3');
      first.close();
      const db = openDb(file);
      try {
        expect((db.prepare('SELECT version FROM schema_migrations ORDER BY version').all() as Array<{ version: number }>).map((r) => r.version)).to.deep.equal([1, 2, 3, 4]);
        expect(db.prepare('SELECT head FROM runs WHERE run_id = ?').get('old-1')).to.deep.equal({ head: null });
        const runs = new SqliteRunTable<Row, View>(db, VIEW);
        expect(await runs.view('old-1')).to.deep.equal(VIEW.of(old));
        expect((await runs.page('t', { limit: 5 })).items).to.deep.equal([VIEW.of(old)]);
        const next = row('old-1', 'failed', 4, true);
        await runs.put(next);
        expect(db.prepare('SELECT head FROM runs WHERE run_id = ?').get('old-1')).to.not.deep.equal({ head: null });
        expect(await runs.view('old-1')).to.deep.equal(VIEW.of(next));
      } finally {
        db.close();
      }
    });

    it('on SQLite, a database whose head follows the body (migration 3 only): migration 4 puts the head first and keeps rows, heads and indexes', async () => {
      const file = path.join(await mkdtemp(path.join(tmpdir(), 'runplane-head-last-')), 'runplane.db');
      const first = openDb(file);
      const table = new SqliteRunTable<Row, View>(first, VIEW);
      const rows = [row('a-1', 'failed', 3, true), row('a-2', 'running', 6000), row('a-3', 'queued', 0)];
      for (const r of rows) await table.put(r);
      // the layout migration 3 left: the head after the body
      first.exec(`CREATE TABLE runs_v3 (run_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL, body TEXT NOT NULL, head TEXT);
        INSERT INTO runs_v3 SELECT run_id, tenant_id, status, created_at, body, head FROM runs; DROP TABLE runs; ALTER TABLE runs_v3 RENAME TO runs;
        CREATE INDEX runs_by_tenant ON runs (tenant_id, created_at DESC, run_id DESC); CREATE INDEX runs_unfinished ON runs (status) WHERE status IN ('queued', 'running');
        DELETE FROM schema_migrations WHERE version = 4`);
      const columns = (db: Db) => (db.prepare("SELECT name FROM pragma_table_info('runs')").all() as Array<{ name: string }>).map((c) => c.name);
      expect(columns(first)).to.deep.equal(['run_id', 'tenant_id', 'status', 'created_at', 'body', 'head']);
      const heads = first.prepare('SELECT run_id, head, body FROM runs ORDER BY run_id').all();
      first.close();
      const db = openDb(file);
      try {
        expect(columns(db)).to.deep.equal(['run_id', 'tenant_id', 'status', 'created_at', 'head', 'body']);
        expect(db.prepare('SELECT run_id, head, body FROM runs ORDER BY run_id').all(), 'every row, head and body as they were').to.deep.equal(heads);
        const indexes = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs' AND sql IS NOT NULL ORDER BY name").all() as Array<{ name: string }>).map((i) => i.name);
        expect(indexes).to.deep.equal(['runs_by_tenant', 'runs_unfinished']);
        const plan = db.prepare("EXPLAIN QUERY PLAN SELECT head FROM runs WHERE tenant_id = 't' ORDER BY created_at DESC, run_id DESC LIMIT 5").all() as Array<{ detail: string }>;
        expect(plan.map((p) => p.detail).join(' ')).to.include('runs_by_tenant');
        const runs = new SqliteRunTable<Row, View>(db, VIEW);
        for (const r of rows) expect(await runs.view(r.run_id)).to.deep.equal(VIEW.of(r));
        expect((await runs.page('t', { limit: 5 })).items).to.have.length(3);
      } finally {
        db.close();
      }
    });

    it('on PostgreSQL', async function () {
      this.timeout(60_000);
      const pg = await startPostgres();
      const pool = await openPool(pg.url);
      try {
        await everyWrite((view) => ({
          runs: new PgRunTable<Row, View>(pool, view),
          events: new PgEventTable(pool, 1000, view),
          atomic: new PgAtomicOps(pool),
          sql: async (q, ...params) => void (await pool.query(q.split('?').reduce((acc, part, i) => (i === 0 ? part : `${acc}$${i}${part}`)), params)),
        }));
      } finally {
        await pool.end();
        await pg.stop();
      }
    });
  });
});
