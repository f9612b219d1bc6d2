import { expect } from 'chai';
import { startGateway, newToken, sleep, type TestGateway } from '../support/gateway.ts';
import { ownAddresses, startHostListener, urlFor, type HostListener } from '../support/host-listener.ts';
import { startSite, type Site } from '../support/site.ts';

// SERVICE_ALLOW_PRIVATE_NETWORKS off (the default): the agents' egress guard
// keeps the browser off loopback and off the host's own addresses, and webhooks
// are not delivered there, so a plan aimed at them fails without the target ever
// seeing a request.
describe('runs and the egress guard (private networks not allowed)', function () {
  this.timeout(180_000);
  let gw: TestGateway;
  let site: Site;
  let host: HostListener;
  const token = newToken();

  before(async () => {
    site = await startSite();
    host = await startHostListener();
    gw = await startGateway({
      env: { SERVICE_RUNNER: 'on', SERVICE_PLANES: 'local', SERVICE_WEBHOOK_RETRY_SECONDS: '0.01' },
      keys: { [token]: { tenant_id: 'guarded', rate_limit_per_minute: 0, default_compute_backend: 'dom_plane' } },
    });
  });
  after(async () => {
    await gw.close();
    await site.close();
    await host.close();
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

  for (const plane of ['dom_plane', 'computer_plane'] as const) {
    it(`${plane}: a navigate to the host's own interface address never reaches a service bound to every interface`, async () => {
      for (const address of ownAddresses()) {
        const before = host.hits.length;
        const url = urlFor(address, host.port, `/admin?plane=${plane}`);
        const r = await gw.req('POST', '/v1/predict', {
          token,
          body: { detached: false, compute_backend: plane, plan: [{ intent: 'open the host service', type: 'navigate', url, required: true }] },
        });
        expect(r.status, r.text).to.equal(200);
        expect(host.hits.slice(before), `${plane} reached ${url}`).to.deep.equal([]);
        // computer_plane navigates through the address bar and sees no HTTP status, so the
        // runner cannot tell the guard's 403 page from a page (the agent-level test in
        // test/planes/plane-network.test.ts checks that page and egress.last_blocked)
        if (plane === 'computer_plane') continue;
        expect(r.body.status, `${url}: ${JSON.stringify(r.body.steps)}`).to.equal('failed');
        expect(r.body.steps[0].success, url).to.equal(false);
        const life = (await gw.req('GET', `/v1/runs/${r.body.run_id}`, { token })).body;
        expect(life.halt_class, url).to.equal('navigate_failed');
      }
    });
  }

  it("refuses a webhook whose callback_url is the host's own interface address and logs the refusal", async () => {
    for (const address of ownAddresses()) {
      const before = host.hits.length;
      const callback = urlFor(address, host.port, '/hook');
      const r = await gw.req('POST', '/v1/predict', { token, body: { plan: [{ intent: 'wait a moment', type: 'wait', seconds: 0.1 }], callback_url: callback } });
      expect(r.status, r.text).to.equal(200);
      let life: { webhook: { deliveries: Array<{ error: string | null; status: number | null }> } } | undefined;
      for (let i = 0; i < 200; i++) {
        life = (await gw.req('GET', `/v1/runs/${r.body.run_id}`, { token })).body;
        if ((life?.webhook?.deliveries.length ?? 0) >= 2) break;
        await sleep(50);
      }
      const deliveries = life?.webhook?.deliveries ?? [];
      expect(deliveries, callback).to.have.length(2);
      for (const d of deliveries) {
        expect(d.status, callback).to.equal(null);
        expect(d.error, callback).to.match(/^egress to .* refused: .*an address of this host/);
      }
      expect(host.hits.slice(before), callback).to.deep.equal([]);
    }
  });
});
