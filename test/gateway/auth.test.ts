import { expect } from 'chai';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { KeysFileResolver } from '../../gateway/http/tenants.ts';
import { createLogger } from '../../gateway/log.ts';
import { startGateway, newToken, sleep, step, request, type TestGateway } from '../support/gateway.ts';

describe('gateway authentication and tenants', () => {
  describe('keys file', () => {
    let gw: TestGateway;
    const a = newToken();
    const b = newToken();
    const readOnly = newToken();

    before(async () => {
      gw = await startGateway({
        keys: {
          [a]: { tenant_id: 'acme' },
          [b]: { tenant_id: 'globex', rate_limit_per_minute: 0 },
          [readOnly]: { tenant_id: 'acme', scopes: ['status', 'result'] },
        },
      });
    });
    after(() => gw.close());

    it('answers 401 {detail} without a token and with an unknown one', async () => {
      const none = await gw.req('GET', '/v1/recipes');
      expect(none.status).to.equal(401);
      expect(none.body.detail).to.match(/X-Service-Token/);
      const wrong = await gw.req('GET', '/v1/recipes', { token: newToken() });
      expect(wrong.status).to.equal(401);
      expect(wrong.body).to.have.property('detail').that.is.a('string');
    });

    it('fills every TenantConfig default from the spec', async () => {
      const tenant = await gw.gateway.services.tenants.resolve(a);
      expect(tenant).to.deep.include({
        tenant_id: 'acme',
        scopes: ['run', 'status', 'result', 'logs'],
        max_concurrent_runs: 5,
        max_cost_per_run: 25,
        max_time_minutes_per_run: 60,
        rate_limit_per_minute: 30,
        model_provider_secret_name: 'model_provider_api_key',
        allowed_domains: [],
        webhook_url: '',
        webhook_secret_name: '',
      });
    });

    it('gives 403 on starting a run to a token with only status and result, and lets it read', async () => {
      const started = await gw.req('POST', '/v1/predict', { token: a, body: { plan: [step()] } });
      expect(started.status).to.equal(200);
      const refused = await gw.req('POST', '/v1/predict', { token: readOnly, body: { plan: [step()] } });
      expect(refused.status).to.equal(403);
      expect(refused.body.detail).to.match(/run/);
      const status = await gw.req('POST', '/v1/predict', { token: readOnly, body: { action: 'status', run_id: started.body.run_id } });
      expect(status.status).to.equal(200);
      expect(status.body.status).to.equal('queued');
      const logs = await gw.req('POST', '/v1/predict', { token: readOnly, body: { action: 'logs', run_id: started.body.run_id } });
      expect(logs.status).to.equal(403);
      const events = await gw.req('GET', `/v1/runs/${started.body.run_id}/events`, { token: readOnly });
      expect(events.status).to.equal(403);
    });

    it('adds, rotates and revokes tokens without a restart', async () => {
      const c = newToken();
      expect((await gw.req('GET', '/v1/recipes', { token: c })).status).to.equal(401);
      await gw.writeKeys({ [a]: { tenant_id: 'acme' }, [b]: { tenant_id: 'globex' }, [c]: { tenant_id: 'acme' } });
      await sleep(300);
      // rotation: both tokens resolve to the same tenant and see the same runs
      const run = await gw.req('POST', '/v1/predict', { token: c, body: { plan: [step()] } });
      expect(run.status).to.equal(200);
      expect((await gw.req('GET', `/v1/runs/${run.body.run_id}`, { token: a })).status).to.equal(200);
      // revocation: the old entry removed
      await gw.writeKeys({ [b]: { tenant_id: 'globex' }, [c]: { tenant_id: 'acme' } });
      await sleep(300);
      expect((await gw.req('GET', '/v1/recipes', { token: a })).status).to.equal(401);
      expect((await gw.req('GET', '/v1/recipes', { token: c })).status).to.equal(200);
    });

    it('keeps the last good configuration when the file turns malformed, and logs it', async () => {
      await writeFile(gw.keysPath, '{"tenant_keys": {not json');
      await sleep(300);
      expect((await gw.req('GET', '/v1/recipes', { token: b })).status).to.equal(200);
      expect(gw.logs.some((l) => l.includes('not valid JSON') && l.includes('"level":"error"'))).to.equal(true);
      await writeFile(gw.keysPath, JSON.stringify({ tenant_keys: [] }));
      await sleep(300);
      expect((await gw.req('GET', '/v1/recipes', { token: b })).status).to.equal(200);
    });

    it('rejects an entry with an unsafe tenant_id at load, naming the problem but never the token', async () => {
      const bad1 = newToken();
      const bad2 = newToken();
      const bad3 = newToken();
      await gw.writeKeys({
        [b]: { tenant_id: 'globex' },
        [bad1]: { tenant_id: 'has space' },
        [bad2]: { tenant_id: 'a/b' },
        [bad3]: { tenant_id: '..' },
      });
      await sleep(300);
      for (const t of [bad1, bad2, bad3]) expect((await gw.req('GET', '/v1/recipes', { token: t })).status).to.equal(401);
      expect((await gw.req('GET', '/v1/recipes', { token: b })).status).to.equal(200);
      const rejected = gw.logs.filter((l) => l.includes('tenant entry rejected'));
      expect(rejected.length).to.be.greaterThanOrEqual(3);
      expect(rejected.some((l) => l.includes('has space') && l.includes('tenant_id: must match pattern'))).to.equal(true);
      const all = gw.logs.join('\n');
      for (const t of [a, b, bad1, bad2, bad3, readOnly]) expect(all).not.to.include(t);
    });

    it('writes one structured JSON line per request with the spec fields and no credentials', async () => {
      const before = gw.logs.length;
      await gw.req('GET', '/v1/recipes', { token: b, headers: { 'X-Request-Id': 'trace-me-123' } });
      const line = gw.logs.slice(before).map((l) => JSON.parse(l)).find((l) => l.request_id === 'trace-me-123');
      expect(line).to.include({ level: 'info', logger: 'gateway.http', msg: 'request', tenant_id: 'globex', method: 'GET', path: '/v1/recipes', status: 200 });
      expect(line.ts).to.match(/^\d{4}-\d\d-\d\dT/);
      expect(line.duration_ms).to.be.a('number');
    });
  });

  it('answers 503 {detail} on authenticated routes when no auth is configured, and serves the open ones', async () => {
    const gw = await startGateway();
    try {
      const r = await gw.req('POST', '/v1/predict', { token: newToken(), body: { plan: [step()] } });
      expect(r.status).to.equal(503);
      expect(r.body.detail).to.match(/not configured/);
      expect((await gw.req('GET', '/v1/recipes')).status).to.equal(503);
      expect((await gw.req('GET', '/health')).status).to.equal(200);
    } finally {
      await gw.close();
    }
  });

  it('serves one tenant with SERVICE_API_TOKEN', async () => {
    const token = newToken();
    const gw = await startGateway({ env: { SERVICE_API_TOKEN: token, SERVICE_API_TENANT_ID: 'solo' } });
    try {
      expect((await gw.req('GET', '/v1/recipes', { token })).status).to.equal(200);
      expect((await gw.req('GET', '/v1/recipes', { token: token.slice(0, -1) + (token.endsWith('0') ? '1' : '0') })).status).to.equal(401);
      const run = await gw.req('POST', '/v1/predict', { token, body: { plan: [step()] } });
      expect(run.status).to.equal(200);
      expect(gw.logs.join('\n')).not.to.include(token);
    } finally {
      await gw.close();
    }
  });

  it('writes SERVICE_TENANT_KEYS_JSON to a file at boot and uses it', async () => {
    const token = newToken();
    const gw = await startGateway({ env: { SERVICE_TENANT_KEYS_JSON: JSON.stringify({ tenant_keys: { [token]: { tenant_id: 'from-env' } } }) } });
    try {
      expect((await gw.req('GET', '/v1/recipes', { token })).status).to.equal(200);
      expect(gw.gateway.services.tenants.mode).to.equal('keys-file');
    } finally {
      await gw.close();
    }
  });

  describe('platform route families', () => {
    let gw: TestGateway;
    const token = newToken();
    const apiKey = newToken();
    before(async () => {
      gw = await startGateway({ keys: { [token]: { tenant_id: 'plat' } }, env: { GATEWAY_API_KEY: apiKey } });
    });
    after(() => gw.close());

    const withKey = { Authorization: `Api-Key ${apiKey}` };

    it('routes /production/predict and /deployment/<id>/predict to the predict handler', async () => {
      for (const p of ['/production/predict', '/deployment/dep-42/predict']) {
        const r = await gw.req('POST', p, { token, body: { plan: [step()] }, headers: withKey });
        expect(r.status, p).to.equal(200);
        expect(r.body.run_id).to.be.a('string');
      }
    });

    it('routes /production/sync/<path> and /deployment/<id>/sync/<path> to the same path inside', async () => {
      const models = await gw.req('GET', '/production/sync/v1/models', { headers: withKey });
      expect(models.status).to.equal(200);
      expect(models.body.object).to.equal('list');
      expect(models.body.data, 'the accepted ids').to.have.length(8);
      expect(models.body.data.filter((m: { served: boolean }) => m.served), 'no brains file: no brain is served').to.deep.equal([]);
      expect((await gw.req('GET', '/deployment/abc/sync/v1/health', { headers: withKey })).body).to.deep.equal({ status: 'ok' });
      const recipes = await gw.req('GET', '/production/sync/v1/recipes', { headers: withKey });
      expect(recipes.status, 'inner auth still applies').to.equal(401);
      expect((await gw.req('GET', '/production/sync/v1/recipes', { headers: withKey, token })).status).to.equal(200);
    });

    it('requires Authorization: Api-Key on these families when GATEWAY_API_KEY is set', async () => {
      expect((await gw.req('GET', '/production/sync/v1/health')).status).to.equal(401);
      expect((await gw.req('GET', '/production/sync/v1/health', { headers: { Authorization: `Api-Key ${newToken()}` } })).status).to.equal(401);
      expect((await gw.req('POST', '/production/predict', { token, body: { plan: [step()] } })).status).to.equal(401);
      // the plain routes do not need it
      expect((await gw.req('GET', '/v1/health')).status).to.equal(200);
      expect(gw.logs.join('\n')).not.to.include(apiKey);
      expect(gw.logs.join('\n')).not.to.include(token);
    });

    it('answers 404 for unknown platform paths and logs the path the client used', async () => {
      expect((await gw.req('GET', '/production/elsewhere', { headers: withKey })).status).to.equal(404);
      expect((await gw.req('GET', '/deployment/bad%20id/predict', { headers: withKey })).status).to.equal(404);
      expect(gw.logs.some((l) => l.includes('"path":"/production/sync/v1/models"'))).to.equal(true);
    });

    it('leaves the families open when GATEWAY_API_KEY is unset', async () => {
      const open = await startGateway({ keys: { [token]: { tenant_id: 'plat' } } });
      try {
        expect((await request(open.url, 'GET', '/production/sync/v1/health')).status).to.equal(200);
      } finally {
        await open.close();
      }
    });
  });
});

describe('tenant resolution cache (keys file)', () => {
  it('refuses a revoked token on the first request after the read cache, and answers only for the exact token', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-keys-'));
    const file = path.join(dir, 'keys.json');
    const [a, b] = [newToken(), newToken()];
    await writeFile(file, JSON.stringify({ tenant_keys: { [a]: { tenant_id: 'acme' }, [b]: { tenant_id: 'globex' } } }));
    let now = 1_000_000;
    const r = new KeysFileResolver(file, 5000, createLogger('silent'), () => now);
    expect((await r.resolve(a))?.tenant_id).to.equal('acme');
    expect(await r.resolve(a.slice(0, -1) + (a.endsWith('0') ? '1' : '0')), 'one character off').to.equal(null);
    await writeFile(file, JSON.stringify({ tenant_keys: { [b]: { tenant_id: 'globex' } } }));
    now += 4999;
    expect((await r.resolve(a))?.tenant_id, 'inside the 5 s read cache of the spec').to.equal('acme');
    now += 1;
    expect(await r.resolve(a), 'revoked: refused on the first request past the cache').to.equal(null);
    expect(await r.resolveById('acme'), 'a tenant with no token left is gone').to.equal(null);
    expect((await r.resolve(b))?.tenant_id).to.equal('globex');
  });
});
