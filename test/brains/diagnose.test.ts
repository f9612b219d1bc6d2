import { expect } from 'chai';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { RUNNER_ENV, startGateway, newToken, sleep, type TestGateway } from '../support/gateway.ts';
import { startFakeModel, type FakeModel } from '../support/fake-model.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('POST /v1/diagnose/fingerprint end to end (the gateway serves its own test page)', function () {
  this.timeout(120_000);
  const token = newToken();
  let gw: TestGateway;
  let fake: FakeModel;

  before(async () => {
    fake = await startFakeModel();
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-diag-'));
    const file = path.join(dir, 'brains.json');
    await writeFile(file, JSON.stringify({ brains: { 'default-cua': { protocol: 'openai-chat', base_url: fake.url, model: 'fake-default' } } }));
    gw = await startGateway({
      dir,
      env: { ...RUNNER_ENV, SERVICE_BRAINS_PATH: file, SERVICE_BEHAVIORAL_JITTER: 'off', SERVICE_PROXY_PROVIDER: 'residential-b' },
      keys: { [token]: { tenant_id: 'diag', rate_limit_per_minute: 0, allowed_domains: ['*.example.com'] } },
    });
  });
  after(async () => {
    await gw.close();
    await fake.close();
  });

  async function finished(runId: string): Promise<Body> {
    for (;;) {
      const r = (await gw.req('GET', `/v1/runs/${runId}`, { token })).body;
      if (!['queued', 'running'].includes(r.status)) return r;
      await sleep(250);
    }
  }

  it('refuses a target_url that is not http(s), an unknown cua_model, and a target outside allowed_domains', async () => {
    for (const target_url of ['ftp://example.com/', 'javascript:alert(1)', 'example.com', 'http://']) {
      const r = await gw.req('POST', '/v1/diagnose/fingerprint', { token, body: { target_url } });
      expect(r.status, target_url).to.equal(400);
      expect(r.body.detail).to.equal('target_url: must begin with http:// or https://');
    }
    const m = await gw.req('POST', '/v1/diagnose/fingerprint', { token, body: { cua_model: 'compact-cua' } });
    expect(m.status).to.equal(400);
    expect(m.body.detail).to.match(/cua_model: must be one of "default-cua", "hosted-api"/);
    expect((await gw.req('POST', '/v1/diagnose/fingerprint', { token, body: { target_url: 'https://bot.sannysoft.com/' } })).status).to.equal(403);
    expect((await gw.req('POST', '/v1/diagnose/fingerprint', { body: {} })).status).to.equal(401);
  });

  it('on dom_plane: answers the handle and stealth snapshot, and the run extracts the page rows mechanically', async () => {
    const r = await gw.req('POST', '/v1/diagnose/fingerprint', { token, body: { compute_backend: 'dom_plane' } });
    expect(r.status, r.text).to.equal(200);
    const { run_id } = r.body;
    expect(r.body).to.deep.equal({
      run_id,
      target_url: `${gw.url}/v1/diagnose/fingerprint/page`,
      poll_via: `/v1/runs/${run_id}`,
      rows_via: `/v1/runs/${run_id}/artifacts/extracted_rows.json`,
      status: 'queued',
      stealth_snapshot: { honest_mode: true, behavioral_jitter: false, geo_consistency: true, cdp_stealth: true, proxy_provider: 'residential-b' },
    });
    const life = await finished(run_id);
    expect(life.status, JSON.stringify(life)).to.equal('succeeded');
    expect(life).to.deep.include({ compute_backend: 'dom_plane', limits: { max_cost: 0.3, max_time_minutes: 3 } });
    const rows = (await gw.req('GET', r.body.rows_via, { token })).body as Body[];
    expect(rows.length).to.be.within(20, 60);
    expect(rows.every((row) => Object.keys(row).join() === 'test,result' && /^(pass|fail|info)/.test(row.result))).to.equal(true);
    const names = rows.map((row) => row.test);
    expect(names).to.include.members(['navigator.webdriver', 'headless user agent', 'plugins', 'languages', 'permissions vs Notification', 'window.chrome', 'WebGL vendor', 'toString tampering', 'timezone']);
    expect(fake.requests, 'no model call on the mechanical path').to.have.length(0);
  });

  it('on computer_plane (no DOM): the brain reads the rows from the screenshot', async () => {
    fake.script = (seen) => (seen.text.includes('"rows"') ? { text: JSON.stringify({ rows: [{ test: 'navigator.webdriver', result: 'pass: undefined' }, { test: 'plugins', result: 'pass: 5' }] }) } : { text: 'no' });
    try {
      const r = await gw.req('POST', '/v1/diagnose/fingerprint', { token, body: { compute_backend: 'computer_plane' } });
      expect(r.status, r.text).to.equal(200);
      const life = await finished(r.body.run_id);
      expect(life.status, JSON.stringify(life)).to.equal('succeeded');
      const rows = (await gw.req('GET', r.body.rows_via, { token })).body as Body[];
      expect(rows).to.deep.equal([
        { test: 'navigator.webdriver', result: 'pass: undefined' },
        { test: 'plugins', result: 'pass: 5' },
      ]);
      const ask = fake.requests.find((q) => q.seen.text.includes('"rows"'))!;
      expect(ask.seen.text).to.include('up to 60 rows');
      expect(ask.seen.image!.width).to.be.greaterThan(0);
    } finally {
      fake.script = undefined;
    }
  });
});
