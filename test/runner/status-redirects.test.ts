// Issue 12 on both planes: a 500 page fails http_5xx (retried, then the run
// halts navigate_failed), a redirect chain lands on its last hop (final_url and
// page_title of the page that loaded, not the first URL), and a chain that ends
// on a 404 fails http_4xx. Real gateway, agents, Chromium (and Xvfb, xdotool).
import { expect } from 'chai';
import { RUNNER_ENV, newToken, startGateway, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

for (const plane of ['dom_plane', 'computer_plane'] as const) {
  describe(`HTTP status and redirect chains (${plane}, real agent and Chromium)`, function () {
    this.timeout(240_000);
    let gw: TestGateway;
    let site: Site;
    const token = newToken();

    before(async () => {
      site = await startSite();
      gw = await startGateway({
        env: { ...RUNNER_ENV },
        keys: { [token]: { tenant_id: 'hops', rate_limit_per_minute: 0, max_concurrent_runs: 2, default_compute_backend: plane } },
      });
    });
    after(async () => {
      await gw.close();
      await site.close();
    });

    async function run(plan: unknown): Promise<{ run: Body; life: Body }> {
      const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: false, compute_backend: plane } });
      expect(r.status, r.text).to.equal(200);
      return { run: r.body, life: (await gw.req('GET', `/v1/runs/${r.body.run_id}`, { token })).body };
    }

    it('fails a 500 page with http_5xx after its retries and halts navigate_failed', async () => {
      const before = site.hits.get('/boom') ?? 0;
      const { run: r, life } = await run([{ intent: 'open a broken page', type: 'navigate', url: `${site.url}/boom`, required: true }]);
      expect(r.status).to.equal('failed');
      expect(r.steps[0], JSON.stringify(r.steps[0]).slice(0, 300)).to.include({ success: false, failure_class: 'http_5xx' });
      expect(r.steps[0].attempts).to.be.above(1);
      expect((site.hits.get('/boom') ?? 0) - before, 'each attempt reached the server').to.equal(r.steps[0].attempts);
      expect(life.halt_class).to.equal('navigate_failed');
      expect(life.failure_help).to.be.an('object');
    });

    it('follows a redirect chain to the page that loaded', async () => {
      const { run: r } = await run([{ intent: 'open through three redirects', type: 'navigate', url: `${site.url}/hop/3/static` }]);
      expect(r.status, JSON.stringify(r.steps)).to.equal('succeeded');
      expect(r.steps[0]).to.include({ success: true, final_url: `${site.url}/static`, page_title: 'Static' });
      for (const hop of ['/hop/3/static', '/hop/2/static', '/hop/1/static', '/hop/0/static']) expect(site.hits.get(hop), hop).to.be.at.least(1);
    });

    it('fails a redirect chain that ends on a 404 with http_4xx', async () => {
      const { run: r } = await run([{ intent: 'open a chain to nowhere', type: 'navigate', url: `${site.url}/hop/2/dead` }]);
      expect(r.status).to.equal('failed');
      expect(r.steps[0], JSON.stringify(r.steps[0]).slice(0, 300)).to.include({ success: false, failure_class: 'http_4xx', final_url: `${site.url}/gone` });
    });
  });
}
