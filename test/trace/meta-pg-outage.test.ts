// Issue 13: with the metadata on PostgreSQL, a database that goes away is 503
// {detail} with Retry-After (never a 500 or a stack trace), and the service
// serves again, with what it had acknowledged, once the database is back. It
// starts its own PostgreSQL cluster, so it runs the same in either suite pass.
import { expect } from 'chai';
import { startPostgres, type PgHandle } from '../support/postgres.ts';
import { body, startIngest, type TestIngest } from '../support/ingest.ts';

const manifest = (runId: string) => ({ schema_version: '1.0.0', run_id: runId, debug_session_id: 'dbg_outage', client_name: 'c', status: 'running', started_at: new Date().toISOString(), capture_mode: 'trace' });

describe('trace ingest metadata on PostgreSQL: an outage', function () {
  this.timeout(120_000);
  let pg: PgHandle;
  let ing: TestIngest;
  before(async () => {
    pg = await startPostgres();
    ing = await startIngest({ databaseUrl: pg.url });
  });
  after(async () => {
    await ing?.close().catch(() => undefined);
    await pg?.stop();
  });

  it('answers 503 {detail} with Retry-After while the database is down, and serves what it acknowledged once it is back', async () => {
    const t = await ing.tenant('outage');
    const cookie = await ing.login(t);
    const post = (id: string) => fetch(`${ing.url}/api/v1/runs`, { method: 'POST', headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' }, body: JSON.stringify(manifest(id)) });
    expect((await post('before-outage')).status).to.equal(201);

    await pg.kill();
    for (const res of [await ing.get('/runs', cookie), await post('during-outage'), await ing.get('/auth/me', cookie)]) {
      expect(res.status).to.equal(503);
      expect(res.headers.get('retry-after')).to.equal('1');
      const b = await body(res);
      expect(b.detail).to.be.a('string').and.not.match(/at .*\.ts:\d+/);
    }

    await pg.start();
    let runs: Array<{ run_id: string }> = [];
    for (let i = 0; i < 50 && !runs.length; i++) {
      const res = await ing.get('/runs', cookie);
      if (res.status === 200) runs = ((await body(res)) as { runs: Array<{ run_id: string }> }).runs;
      else await new Promise((r) => setTimeout(r, 200));
    }
    expect(runs.map((r) => r.run_id)).to.deep.equal(['before-outage']);
    expect((await post('after-outage')).status).to.equal(201);
  });
});
