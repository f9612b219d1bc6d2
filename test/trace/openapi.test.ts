// The ingest service's OpenAPI document agrees with itself (OpenAPI 3.1 path
// rules, a schema for every success) and with what the handlers answer.
import { expect } from 'chai';
import { ROUTES } from '../../plugins/trace-ingest/routes.ts';
import { REPLIES } from '../../plugins/trace-ingest/replies.ts';
import { startIngest, type TestIngest } from '../support/ingest.ts';

type Op = { parameters: Array<{ name: string; in: string }>; responses: Record<string, { content?: Record<string, { schema?: unknown }> }> };
type Doc = { paths: Record<string, Record<string, Op>> };

describe('trace ingest OpenAPI document', () => {
  let ing: TestIngest;
  let doc: Doc;
  before(async () => {
    ing = await startIngest();
    doc = (await (await fetch(`${ing.url}/api/v1/openapi.json`)).json()) as Doc;
  });
  after(() => ing.close());

  it('has no two paths that differ only by parameter names, and declares exactly the parameters of its template', () => {
    const shapes = Object.keys(doc.paths).map((p) => p.replace(/\{\w+\}/g, '{}'));
    expect(shapes.filter((s, i) => shapes.indexOf(s) !== i)).to.deep.equal([]);
    for (const [p, item] of Object.entries(doc.paths)) {
      const names = [...p.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
      for (const [method, op] of Object.entries(item)) expect(op.parameters.filter((x) => x.in === 'path').map((x) => x.name).sort(), `${method} ${p}`).to.deep.equal(names);
    }
  });

  it('gives every operation a 2xx answer with a schema, and documents every route', () => {
    let ops = 0;
    for (const [p, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        ops++;
        const ok = Object.entries(op.responses).filter(([code]) => /^2\d\d$/.test(code));
        expect(ok.length, `${method} ${p}`).to.be.greaterThan(0);
        for (const [code, r] of ok) {
          const media = Object.values(r.content ?? {});
          expect(media, `${method} ${p} ${code}`).to.have.length(1);
          expect(media[0]!.schema, `${method} ${p} ${code}`).to.be.an('object');
        }
      }
    }
    expect(ops).to.equal(ROUTES.length + 3); // plus /batch, /healthz and /metrics
    for (const r of ROUTES) expect(REPLIES, `${r.method} ${r.path}`).to.have.property(`${r.method} ${r.path}`);
  });

  it('documents the statuses the handlers answer: 201 then 200 for POST /runs and eval candidates, 201 for outcomes', async () => {
    const t = await ing.tenant('oa');
    const post = (path: string, body: unknown) =>
      fetch(`${ing.url}/api/v1${path}`, { method: 'POST', headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const manifest = { schema_version: '1.0.0', run_id: 'oa-run', debug_session_id: 'dbg_oa', client_name: 'c', status: 'running', started_at: new Date().toISOString(), capture_mode: 'trace' };
    const seen: Record<string, number[]> = { '/runs': [], '/runs/{run_id}/eval-candidates': [], '/runs/{run_id}/outcomes': [] };
    for (let i = 0; i < 2; i++) {
      const r = await post('/runs', manifest);
      seen['/runs']!.push(r.status);
      const e = await post('/runs/oa-run/eval-candidates', { step_index: 0, reason: 'x' });
      seen['/runs/{run_id}/eval-candidates']!.push(e.status);
      const o = await post('/runs/oa-run/outcomes', { scope: 'session', verdict: { status: 'passed' } });
      seen['/runs/{run_id}/outcomes']!.push(o.status);
    }
    expect(seen).to.deep.equal({ '/runs': [201, 200], '/runs/{run_id}/eval-candidates': [201, 200], '/runs/{run_id}/outcomes': [201, 201] });
    for (const [p, statuses] of Object.entries(seen)) {
      const documented = Object.keys(doc.paths[p]!.post!.responses).filter((c) => /^2/.test(c)).map(Number).sort();
      expect(documented, p).to.deep.equal([...new Set(statuses)].sort());
    }
  });
});
