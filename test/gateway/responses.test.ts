// The OpenAPI document's success bodies are what the server answers: every
// route that declares one (`ok` in its declaration) is called on a real
// gateway with real runs, and its body is validated against the schema the
// served /openapi.json names for its 200, by ajv.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { RUNNER_ENV, newToken, startGateway, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';
import { startFakeModel, type FakeModel, fakeBrainsDir } from '../support/fake-model.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('success bodies against the OpenAPI document (real gateway, real runs)', function () {
  this.timeout(180_000);
  let gw: TestGateway;
  let site: Site;
  let fake: FakeModel;
  let doc: Body;
  let ajv: Ajv2020;
  const token = newToken();
  const operator = newToken();
  const ids: Record<string, string> = {};

  before(async () => {
    [site, fake] = await Promise.all([startSite(), startFakeModel()]);
    const { dir, brainsPath: brains } = await fakeBrainsDir(fake, 'shapes');
    // the operator's vault key, as a shared store (PostgreSQL) needs one named
    await writeFile(path.join(dir, 'secrets', 'vault.key'), randomBytes(32).toString('hex'), { mode: 0o600 });
    gw = await startGateway({
      dir,
      env: { ...RUNNER_ENV, SERVICE_BRAINS_PATH: brains },
      keys: { [token]: { tenant_id: 'shapes', rate_limit_per_minute: 0, default_compute_backend: 'dom_plane' }, [operator]: { tenant_id: 'ops', scopes: ['operator'] } },
    });
    doc = (await gw.req('GET', '/openapi.json')).body;
    ajv = new Ajv2020({ strict: false, allErrors: true });
    (addFormats as unknown as (a: Ajv2020) => void)(ajv);
    ajv.addSchema({ $id: 'openapi', components: doc.components });
    const run = async (plan: unknown) => (await gw.req('POST', '/v1/predict', { token, body: { plan, detached: false } })).body.run_id as string;
    ids.ok = await run([{ intent: 'open', type: 'navigate', url: `${site.url}/static` }]);
    ids.failed = await run([{ intent: 'open a page that is gone', type: 'navigate', url: `${site.url}/gone`, required: true }]);
  });
  after(async () => {
    await gw.close();
    await site.close();
    await fake.close();
  });

  /** The schema the document gives the success (`status`, 200 unless told) of `method path`, checked against `body`. */
  function conforms(method: string, path: string, body: unknown, status = '200'): void {
    const op = doc.paths[path]?.[method.toLowerCase()];
    expect(op, `${method} ${path} is documented`).to.be.an('object');
    const ref = op.responses[status]?.content?.['application/json']?.schema?.$ref as string | undefined;
    expect(ref, `${method} ${path} documents its ${status} body`).to.be.a('string');
    const validate = ajv.getSchema(`openapi${ref}`)!;
    expect(validate(body), `${method} ${path}: ${JSON.stringify(validate.errors)}`).to.equal(true);
  }

  it('runs: list, lifecycle, status, result, events and cancel', async () => {
    for (const id of [ids.ok!, ids.failed!]) {
      conforms('GET', '/v1/runs/{run_id}', (await gw.req('GET', `/v1/runs/${id}`, { token })).body);
      conforms('GET', '/v1/runs/{run_id}/status', (await gw.req('GET', `/v1/runs/${id}/status`, { token })).body);
      conforms('GET', '/v1/runs/{run_id}/result', (await gw.req('GET', `/v1/runs/${id}/result`, { token })).body);
      conforms('GET', '/v1/runs/{run_id}/events', (await gw.req('GET', `/v1/runs/${id}/events`, { token })).body);
      const trace = await gw.req('GET', `/v1/runs/${id}/trace`, { token });
      expect(trace.status, trace.text).to.equal(200);
      conforms('GET', '/v1/runs/{run_id}/trace', trace.body);
    }
    const list = (await gw.req('GET', '/v1/runs?limit=1', { token })).body;
    expect(list.next_cursor).to.be.a('string');
    conforms('GET', '/v1/runs', list);
    const queued = (await gw.req('POST', '/v1/predict', { token, body: { plan: [{ intent: 'wait', type: 'wait', seconds: 30 }], detached: true } })).body.run_id;
    conforms('POST', '/v1/runs/{run_id}/cancel', (await gw.req('POST', `/v1/runs/${queued}/cancel`, { token })).body);
  });

  it('credentials: created (201), read, listed, replaced and deleted', async () => {
    const made = await gw.req('POST', '/v1/credentials', { token, body: { name: 'shape', username: 'u', password: 'p4ss-word', totp_secret: 'JBSWY3DPEHPK3PXP', origins: ['https://login.example.com'] } });
    expect(made.status, made.text).to.equal(201);
    conforms('POST', '/v1/credentials', made.body, '201');
    conforms('GET', '/v1/credentials', (await gw.req('GET', '/v1/credentials', { token })).body);
    conforms('GET', '/v1/credentials/{name}', (await gw.req('GET', '/v1/credentials/shape', { token })).body);
    conforms('PUT', '/v1/credentials/{name}', (await gw.req('PUT', '/v1/credentials/shape', { token, body: { username: 'v', password: 'p4ss-word-2', origins: ['https://login.example.com'] } })).body);
    conforms('DELETE', '/v1/credentials/{name}', (await gw.req('DELETE', '/v1/credentials/shape', { token })).body);
  });

  it('recipes, tickets and planes', async () => {
    const recipe = { name: 'shape-check', schema: { item_selector: '.card', fields: [{ name: 'title', type: 'str', selector: 'h2' }] } };
    conforms('POST', '/v1/recipes', (await gw.req('POST', '/v1/recipes', { token, body: recipe })).body);
    conforms('GET', '/v1/recipes', (await gw.req('GET', '/v1/recipes', { token })).body);
    conforms('GET', '/v1/recipes/{name}', (await gw.req('GET', '/v1/recipes/shape-check', { token })).body);
    conforms('DELETE', '/v1/recipes/{name}', (await gw.req('DELETE', '/v1/recipes/shape-check', { token })).body);
    conforms('POST', '/v1/ws-tickets', (await gw.req('POST', '/v1/ws-tickets', { token })).body);
    const planes = await gw.req('GET', '/v1/planes', { token: operator });
    expect(planes.body).to.deep.equal({ mode: 'local', agents: [] });
    conforms('GET', '/v1/planes', planes.body);
  });

  it('predict (each action), the diagnostic, models and the ops routes', async () => {
    const predict = (body: Body) => gw.req('POST', '/v1/predict', { token, body }).then((r) => r.body);
    conforms('POST', '/v1/predict', await predict({ plan: [{ intent: 'wait', type: 'wait', seconds: 30 }], detached: true }));
    for (const action of ['status', 'result', 'logs']) conforms('POST', '/v1/predict', await predict({ action, run_id: ids.ok }));
    const diag = await gw.req('POST', '/v1/diagnose/fingerprint', { token, body: {} });
    expect(diag.status, diag.text).to.equal(200);
    conforms('POST', '/v1/diagnose/fingerprint', diag.body);
    await gw.req('POST', `/v1/runs/${diag.body.run_id}/cancel`, { token });
    conforms('GET', '/v1/models', (await gw.req('GET', '/v1/models', { token })).body);
    conforms('GET', '/v1/models/{model}', (await gw.req('GET', '/v1/models/default-cua', { token })).body);
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
    const chat = await gw.req('POST', '/v1/chat/completions', { token, body: { model: 'default-cua', messages: [{ role: 'user', content: [{ type: 'text', text: 'Task: press the hit button' }, { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } }] }] } });
    expect(chat.status, chat.text).to.equal(200);
    conforms('POST', '/v1/chat/completions', chat.body);
    for (const p of ['/health', '/v1/health', '/ready', '/v1/ready', '/v1/version', '/v1/plugins']) conforms('GET', p, (await gw.req('GET', p, { token })).body);
  });

  it('a body that breaks the schema is caught (the check can fail)', () => {
    const validate = ajv.getSchema('openapi#/components/schemas/RunStatusBody')!;
    expect(validate({ run_id: 'x', status: 'sideways' })).to.equal(false);
  });
});
