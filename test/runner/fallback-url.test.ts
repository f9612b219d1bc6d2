// hints.fallback_url recovers a click that kept missing its success contract
// only when the fallback page loads: a fallback that answers 404 or cannot be
// reached leaves the step failed (a result must be true). Real gateway, agent,
// Chromium on dom_plane; the walker's rule is the same on every plane.
import { expect } from 'chai';
import { RUNNER_ENV, newToken, startGateway, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';
import { freePort } from '../support/redis.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('hints.fallback_url (real gateway, dom_plane)', function () {
  this.timeout(180_000);
  let gw: TestGateway;
  let site: Site;
  const token = newToken();

  before(async () => {
    site = await startSite();
    gw = await startGateway({
      env: { ...RUNNER_ENV },
      keys: { [token]: { tenant_id: 'fallback', rate_limit_per_minute: 0, max_concurrent_runs: 2, default_compute_backend: 'dom_plane' } },
    });
  });
  after(async () => {
    await gw.close();
    await site.close();
  });

  async function clickWithFallback(fallback: string): Promise<Body> {
    const plan = [
      { intent: 'open the counter', type: 'navigate', url: `${site.url}/counter` },
      { intent: 'hit, expecting a page that never comes', type: 'click', params: { selector: '#hit' }, hints: { expect_url_contains: '/never', fallback_url: fallback } },
    ];
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: false, compute_backend: 'dom_plane' } });
    expect(r.status, r.text).to.equal(200);
    return r.body.steps[1] as Body;
  }

  it('recovers the step when the fallback page loads', async () => {
    const step = await clickWithFallback(`${site.url}/static`);
    expect(step, JSON.stringify(step).slice(0, 400)).to.include({ success: true });
    expect(step.data).to.match(/recovered by navigating to hints.fallback_url/);
  });

  it('keeps the step failed when the fallback answers 404', async () => {
    const step = await clickWithFallback(`${site.url}/gone`);
    expect(step, JSON.stringify(step).slice(0, 400)).to.include({ success: false, failure_class: 'wrong_target' });
    expect(step.data).to.match(/fallback_url did not load: HTTP 404/);
  });

  it('keeps the step failed when the fallback cannot be reached', async () => {
    const step = await clickWithFallback(`http://127.0.0.1:${await freePort()}/`);
    expect(step, JSON.stringify(step).slice(0, 400)).to.include({ success: false, failure_class: 'wrong_target' });
    expect(step.data).to.match(/fallback_url did not load: ERR_CONNECTION_REFUSED/);
  });
});
