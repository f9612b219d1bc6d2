import { expect } from 'chai';
import { startGateway, newToken, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';

// SERVICE_ALLOW_PRIVATE_NETWORKS off (the default): the agents' egress guard
// keeps the browser off loopback, so a plan aimed at a private address fails
// without the site ever seeing a request.
describe('runs and the egress guard (private networks not allowed)', function () {
  this.timeout(120_000);
  let gw: TestGateway;
  let site: Site;
  const token = newToken();

  before(async () => {
    site = await startSite();
    gw = await startGateway({
      env: { SERVICE_RUNNER: 'on', SERVICE_PLANES: 'local' },
      keys: { [token]: { tenant_id: 'guarded', rate_limit_per_minute: 0, default_compute_backend: 'dom_plane' } },
    });
  });
  after(async () => {
    await gw.close();
    await site.close();
  });

  it('fails a navigate to a loopback site and the site sees nothing', async () => {
    const r = await gw.req('POST', '/v1/predict', { token, body: { detached: false, plan: [{ intent: 'open a private page', type: 'navigate', url: `${site.url}/static`, required: true }] } });
    expect(r.status, r.text).to.equal(200);
    expect(r.body.status).to.equal('failed');
    expect(r.body.steps[0].success).to.equal(false);
    expect(site.hits.size, [...site.hits.keys()].join(' ')).to.equal(0);
    const life = (await gw.req('GET', `/v1/runs/${r.body.run_id}`, { token })).body;
    expect(life.halt_class).to.equal('navigate_failed');
  });
});
