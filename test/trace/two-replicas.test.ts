// Issue 13: two ingest replicas on one metadata database (SQLite in a shared
// data dir; PostgreSQL with RUNPLANE_TEST_STORE=postgres) writing the same run.
// Each replica caches the run's entry, so a replica holding a stale copy must
// not move the run backwards: step_count only grows, and a step's canonical
// step_id is the first one any replica stored (the other is an iteration).
// Databases of the first schema move their canonical ids over (migration 002).
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { openSqlite } from '../../plugins/trace-ingest/meta/db.ts';
import { shortId } from '../../sdk/util.ts';
import { startIngest, type TestIngest } from '../support/ingest.ts';
import { tempDir } from '../support/trace.ts';

const manifest = (runId: string) => ({ schema_version: '1.0.0', run_id: runId, debug_session_id: 'dbg_two', client_name: 'c', status: 'running', started_at: new Date().toISOString(), capture_mode: 'trace' });

function call(ing: TestIngest, key: string, method: string, path: string, body: unknown): Promise<Response> {
  return fetch(`${ing.url}/api/v1${path}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

describe('trace ingest: two replicas writing one run', function () {
  this.timeout(60_000);
  let a: TestIngest;
  let b: TestIngest;
  before(async () => {
    a = await startIngest();
    b = await startIngest({ dataDir: a.dir });
  });
  after(async () => {
    await b?.close();
    await a?.close();
  });

  it('agree on step_count and on each step’s canonical step_id whatever each replica cached', async () => {
    const t = await a.tenant('two');
    const runId = 'run-two-replicas';
    // b caches the run while it is empty ...
    expect((await call(b, t.key, 'POST', '/runs', manifest(runId))).status).to.equal(201);
    // ... then a records 20 steps
    for (let i = 0; i < 20; i++) expect((await call(a, t.key, 'PUT', `/runs/${runId}/steps/${i}`, { step_index: i, step_id: `s${i}`, status: 'passed' })).status).to.equal(200);
    // b, with its stale copy, records another attempt at step 5 and a retry of step 2
    const other = await call(b, t.key, 'PUT', `/runs/${runId}/steps/5`, { step_index: 5, step_id: 't5', status: 'failed' });
    expect(other.status).to.equal(200);
    expect(((await other.json()) as { stored: string }).stored).to.equal(`steps/0005/${shortId('t5')}.json`);
    expect((await call(b, t.key, 'PUT', `/runs/${runId}/steps/2`, { step_index: 2, step_id: 's2', status: 'passed' })).status).to.equal(200);

    const cookie = await a.login(t);
    for (const ing of [a, b]) {
      const runs = (await ing.json('/runs', cookie)).runs as Array<{ run_id: string; step_count: number }>;
      expect(runs.find((r) => r.run_id === runId)?.step_count, 'step_count went backwards').to.equal(20);
      expect((await ing.json(`/runs/${runId}/steps/0005.json`, cookie)).step_id).to.equal('s5');
      expect((await ing.json(`/runs/${runId}/files/steps/0005/${shortId('t5')}.json`, cookie)).step_id).to.equal('t5');
    }
  });

  it('a step claimed at the same moment on both replicas has one canonical record and one iteration', async () => {
    const t = await a.tenant('race');
    const runId = 'run-race';
    expect((await call(a, t.key, 'POST', '/runs', manifest(runId))).status).to.equal(201);
    expect((await call(b, t.key, 'POST', '/runs', manifest(runId))).status).to.equal(200);
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => [
        call(a, t.key, 'PUT', `/runs/${runId}/steps/${i}`, { step_index: i, step_id: `a${i}`, status: 'passed' }),
        call(b, t.key, 'PUT', `/runs/${runId}/steps/${i}`, { step_index: i, step_id: `b${i}`, status: 'passed' }),
      ]).flat(),
    );
    const stored = await Promise.all(answers.map(async (r) => ((await r.json()) as { stored: string }).stored));
    const cookie = await a.login(t);
    for (let i = 0; i < 10; i++) {
      const pair = [stored[2 * i]!, stored[2 * i + 1]!];
      const canonical = `steps/${String(i).padStart(4, '0')}.json`;
      expect(pair.filter((p) => p === canonical), `step ${i}: ${pair.join(', ')}`).to.have.length(1);
      const winner = pair[0] === canonical ? `a${i}` : `b${i}`;
      const loser = winner.startsWith('a') ? `b${i}` : `a${i}`;
      expect((await a.json(`/runs/${runId}/${canonical}`, cookie)).step_id).to.equal(winner);
      expect((await b.json(`/runs/${runId}/files/${pair.find((p) => p !== canonical)!}`, cookie)).step_id).to.equal(loser);
    }
  });
});

describe('trace ingest metadata: migration 002', () => {
  it('moves the canonical step ids a database of the first schema kept in trace_runs into trace_run_steps', async () => {
    const file = path.join(await tempDir('mig-'), 'meta.sqlite');
    const old = new Database(file);
    old.exec('CREATE TABLE trace_schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
    old.exec(readFileSync(path.resolve(import.meta.dirname, '../../plugins/trace-ingest/meta/migrations/sqlite/001_trace_meta.sql'), 'utf8'));
    old.prepare("INSERT INTO trace_schema_migrations VALUES (1, '001_trace_meta.sql', 'then')").run();
    old.prepare("INSERT INTO trace_runs VALUES ('r1', 't', 'then', 'then', 'passed', 'c', NULL, 3, NULL, NULL, NULL, ?)").run(JSON.stringify({ 0: 's0', 2: 's2' }));
    old.close();
    const db = openSqlite(file);
    try {
      expect(await db.all('SELECT step_index, step_id FROM trace_run_steps ORDER BY step_index')).to.deep.equal([
        { step_index: 0, step_id: 's0' },
        { step_index: 2, step_id: 's2' },
      ]);
    } finally {
      await db.close();
    }
  });
});
