import { expect } from 'chai';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { startGateway, newToken, step, type TestGateway } from '../support/gateway.ts';
import { loadConfig } from '../../gateway/config.ts';
import { ALL_ROUTES } from '../../gateway/app.ts';
import { validator } from '../../schemas/index.ts';
import { componentFor } from '../../gateway/openapi.ts';
import { MODEL_IDS } from '../../gateway/brains/model-ids.ts';
import http from 'node:http';

describe('unauthenticated and ops endpoints', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway({ env: { SERVICE_GIT_SHA: 'abc1234', SERVICE_DEPLOYED_AT: new Date(Date.now() - 3 * 86_400_000).toISOString() } });
  });
  after(() => gw.close());

  it('serves liveness on /health and /v1/health', async () => {
    for (const p of ['/health', '/v1/health']) {
      const r = await gw.req('GET', p);
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal({ status: 'ok' });
    }
  });

  it('serves the version snapshot with deploy_age_days', async () => {
    const r = await gw.req('GET', '/v1/version');
    expect(r.body).to.include({ version: '0.1.0', git_sha: 'abc1234', node_version: process.version });
    expect(r.body.deploy_age_days).to.be.within(2.99, 3.01);
    expect(Date.parse(r.body.started_at)).to.be.a('number');
  });

  it('lists on /v1/models the eight accepted ids whatever the brains file holds, each saying whether it is served', async () => {
    const r = await gw.req('GET', '/v1/models');
    expect(r.body.object).to.equal('list');
    expect(r.body.data.map((m: { id: string }) => m.id)).to.deep.equal(['default-cua', 'compact-cua', 'tuned-cua', 'mid-cua-8b', 'mid-cua-32b', 'large-cua-32b', 'large-cua-72b', 'hosted-api']);
    for (const m of r.body.data) expect(m).to.include({ object: 'model', owned_by: 'runplane', served: false });
    const one = await gw.req('GET', `/v1/models/${MODEL_IDS[0]}`);
    expect(one.status).to.equal(200);
    expect(one.body).to.include({ id: 'default-cua', object: 'model', served: false });
    const unknown = await gw.req('GET', '/v1/models/gpt-9');
    expect(unknown.status).to.equal(404);
    expect(unknown.body.error).to.deep.include({ code: 'model_not_found', param: 'model' });
  });

  it('in single-brain mode marks SERVICE_MODEL served only when a backend serves it, and ignores cua_model', async () => {
    const token = newToken();
    const single = await startGateway({ env: { SERVICE_MODEL: 'compact-cua' }, keys: { [token]: { tenant_id: 'solo' } } });
    try {
      const listed = (await single.req('GET', '/v1/models')).body.data as Array<{ id: string; served: boolean }>;
      expect(listed.map((m) => m.id), 'the accepted ids, served or not').to.deep.equal([...MODEL_IDS]);
      expect(listed.filter((m) => m.served), 'no brains file: compact-cua has no backend').to.deep.equal([]);
      const r = await single.req('POST', '/v1/predict', { token, body: { plan: [step()], cua_model: 'large-cua-72b' } });
      expect(r.status).to.equal(200);
      const rec = await single.gateway.services.runs.get((await single.gateway.services.tenants.resolve(token))!, r.body.run_id);
      expect(rec.cua_model).to.equal('compact-cua');
    } finally {
      await single.close();
    }
  });

  it('documents for every operation a 2xx body with its content type and a schema', async () => {
    const doc = (await gw.req('GET', '/openapi.json')).body as { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema?: object }> }> }>> };
    const missing: string[] = [];
    for (const [p, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        const bodies = Object.entries(op.responses)
          .filter(([code]) => /^2\d\d$/.test(code))
          .flatMap(([, r]) => Object.entries(r.content ?? {}));
        const schemaless = bodies.filter(([, media]) => !media.schema || Object.keys(media.schema).length === 0).map(([type]) => type);
        if (bodies.length === 0 || schemaless.length > 0) missing.push(`${method.toUpperCase()} ${p}${schemaless.length ? ` (${schemaless.join(', ')})` : ''}`);
      }
    }
    expect(missing).to.deep.equal([]);
    // the content types documented are the ones served
    const served = async (p: string) => (await gw.req('GET', p)).headers.get('content-type')!.split(';')[0]!;
    expect(Object.keys(doc.paths['/metrics']!.get!.responses['200']!.content!)).to.include(await served('/metrics'));
    expect(Object.keys(doc.paths['/openapi.json']!.get!.responses['200']!.content!)).to.include(await served('/openapi.json'));
    expect(doc.paths['/v1/runs/{run_id}/video']!.get!.responses['200']!.content!['video/webm']!.schema).to.deep.equal({ type: 'string', format: 'binary' });
  });

  it('keeps a kept-alive connection open past what it announces, and across a refused body', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const send = (method: string, p: string, body?: Buffer) =>
      new Promise<{ status: number; headers: http.IncomingHttpHeaders; reused: boolean }>((resolve, reject) => {
        const req = http.request(`${gw.url}${p}`, { method, agent, headers: body ? { 'content-type': 'application/json', 'content-length': String(body.length) } : {} }, (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, reused: req.reusedSocket }));
        });
        req.on('error', reject);
        req.end(body);
      });
    try {
      const first = await send('GET', '/health');
      // clients keep a connection for the hint less a second: the server keeps it 5 s longer than it says
      expect(first.headers['keep-alive']).to.equal('timeout=60');
      expect(gw.gateway.server!.keepAliveTimeout).to.be.greaterThan(65_000 - 1);
      expect((await send('GET', '/health')).reused).to.equal(true);
      // a body refused before it was read, and one past the size cap: the client is told, or the connection stays usable
      for (const [p, size] of [['/v1/predict', 64 * 1024], ['/v1/predict', 8 * 1024 * 1024], ['/v1/diagnose/fingerprint', 64 * 1024 * 1024]] as const) {
        const refused = await send('POST', p, Buffer.alloc(size, 0x20));
        expect(refused.status, p).to.be.within(400, 599);
        // a small refused body is read and the connection kept; a big one unread is closed, and said
        if (p === '/v1/predict') expect(refused.headers.connection, `${p} ${size}`).to.equal(size > 1024 * 1024 ? 'close' : 'keep-alive');
        const next = await send('GET', '/health');
        expect(next.status, `after ${p}`).to.equal(200);
        if (refused.headers.connection !== 'close') expect(next.reused, `after ${p}: kept alive`).to.equal(true);
      }
    } finally {
      agent.destroy();
    }
  });

  it('gates /docs and /redoc behind SERVICE_ENABLE_DOCS_UI', async () => {
    expect((await gw.req('GET', '/docs')).status).to.equal(404);
    expect((await gw.req('GET', '/redoc')).status).to.equal(404);
    expect((await gw.req('GET', '/docs/assets/swagger-ui-bundle.js')).status).to.equal(404);
    const docs = await startGateway({ env: { SERVICE_ENABLE_DOCS_UI: '1' } });
    try {
      const page = await docs.req('GET', '/docs');
      expect(page.status).to.equal(200);
      expect(page.text).to.include('/docs/assets/swagger-ui-bundle.js');
      expect(page.text).not.to.match(/https?:\/\/(?!localhost)/);
      const redoc = await docs.req('GET', '/redoc');
      expect(redoc.text).to.include('/docs/assets/redoc.standalone.js');
      for (const asset of ['swagger-ui-bundle.js', 'swagger-ui.css', 'redoc.standalone.js']) {
        const a = await docs.req('GET', `/docs/assets/${asset}`);
        expect(a.status, asset).to.equal(200);
        expect(a.text.length).to.be.greaterThan(10_000);
      }
      for (const name of ['..%2fpackage.json', '__proto__', 'constructor', 'toString']) {
        expect((await docs.req('GET', `/docs/assets/${name}`)).status, name).to.equal(404);
      }
    } finally {
      await docs.close();
    }
  });

  it('reads the keys file at most every 5 seconds by default', () => {
    expect(loadConfig({}).keysCacheMs).to.equal(5000);
    expect(() => loadConfig({ SERVICE_KEYS_CACHE_MS: '60000' })).to.throw(/SERVICE_KEYS_CACHE_MS/);
  });

  describe('OpenAPI 3.1 from the same schemas', () => {
    let doc: { openapi: string; paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: { $ref: string } }> } }>>; components: { schemas: Record<string, unknown> } };
    before(async () => {
      doc = (await gw.req('GET', '/openapi.json')).body;
    });

    it('is an OpenAPI 3.1 document listing every route', () => {
      expect(doc.openapi).to.equal('3.1.0');
      for (const r of ALL_ROUTES.filter((x) => !x.hidden)) {
        const p = r.path.replace(/[:*]([A-Za-z_]+)/g, '{$1}');
        expect(doc.paths[p], p).to.have.property(r.method.toLowerCase());
      }
    });

    it('documents each body with the schema its validator uses: both agree on a corpus', () => {
      const ajv = new Ajv2020({ strict: false, allowUnionTypes: true });
      ajv.addSchema({ $id: 'https://openapi.local/doc.json', components: doc.components });
      const corpus: unknown[] = [
        { plan: [step()] },
        { plan: { steps: [step()], runtime: { compute_backend: 'dom_plane' } } },
        { plan: [{ type: 'click' }] },
        { plan: [{ intent: 'x', type: 'loop', steps: [{ intent: 'y' }] }] },
        { action: 'status', run_id: 'r' },
        { action: 'nope' },
        { max_cost: -1 },
        { plan: 'x' },
        { name: 'ok', schema: { fields: [{ name: 'a', type: 'str' }] } },
        { name: '-bad', schema: { fields: [{ name: 'a', type: 'str' }] } },
        { name: 'ok', schema: { fields: [] } },
        { name: 'ok', schema: { fields: [{ name: 'a', type: 'str' }], rejection_intents: { a: 2 } } },
      ];
      let compared = 0;
      for (const r of ALL_ROUTES.filter((x) => x.body)) {
        const p = r.path.replace(/:([A-Za-z_]+)/g, '{$1}');
        const ref = doc.paths[p]![r.method.toLowerCase()]!.requestBody!.content['application/json']!.schema.$ref;
        expect(ref).to.equal(`#/components/schemas/${componentFor(r.body!.schema)}`);
        const fromDoc = ajv.getSchema(`https://openapi.local/doc.json${ref}`)!;
        const fromValidator = validator(r.body!.schema);
        for (const sample of corpus) {
          expect(fromDoc(structuredClone(sample)), `${r.path} ${JSON.stringify(sample)}`).to.equal(fromValidator(structuredClone(sample)));
          compared++;
        }
      }
      expect(compared).to.be.greaterThan(20);
    });
  });
});
