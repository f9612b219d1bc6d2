import { expect } from 'chai';
import { startGateway, newToken, type TestGateway } from '../support/gateway.ts';
import { startHostListener, type HostListener } from '../support/host-listener.ts';
import { fakeBrainsDir, startFakeModel, type FakeModel } from '../support/fake-model.ts';
import { startSite, type Site } from '../support/site.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

// A tenant whose allowed_domains hold only the fixture site (127.0.0.1): every way out
// the plan does not name (a link, a 302, a window.open popup, a meta refresh, a brain's
// NAVIGATE) leads to another listener addressed as 127.0.0.2, a different host for the
// matcher, and the agent's egress guard refuses it: that listener never sees a request.
describe("a tenant's allowed_domains at the agent's egress guard (real agents and Chromium)", function () {
  this.timeout(300_000);
  let gw: TestGateway;
  let site: Site;
  let other: HostListener;
  let fake: FakeModel;
  let otherOrigin: string;
  const token = newToken();

  before(async () => {
    other = await startHostListener();
    otherOrigin = `http://127.0.0.2:${other.port}`;
    [site, fake] = await Promise.all([startSite(`${otherOrigin}/`), startFakeModel()]);
    // the brain: leaves for the other host, and once told that was refused, says it is done
    fake.script = (seen) =>
      seen.task.includes('leave the site') && !seen.text.includes('Last action refused')
        ? { call: { action: 'NAVIGATE', url: `${otherOrigin}/brain`, reasoning: 'the answer is on the other site' } }
        : { call: { action: 'DONE', success: true, reasoning: 'done' } };
    const { dir, brainsPath } = await fakeBrainsDir(fake, 'fenced');
    gw = await startGateway({
      dir,
      env: { SERVICE_RUNNER: 'on', SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1', SERVICE_BRAINS_PATH: brainsPath },
      keys: { [token]: { tenant_id: 'fenced', rate_limit_per_minute: 0, max_concurrent_runs: 5, allowed_domains: ['127.0.0.1'] } },
    });
  });
  after(async () => {
    await gw?.close();
    await Promise.all([site?.close(), fake?.close(), other?.close()]);
  });

  async function run(plane: string, plan: Body[]): Promise<{ run: Body; life: Body }> {
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: false, compute_backend: plane } });
    expect(r.status, r.text).to.equal(200);
    const life = (await gw.req('GET', `/v1/runs/${r.body.run_id}`, { token })).body as Body;
    return { run: r.body as Body, life };
  }

  const refusedOther = /^(halted \(navigate_failed\): )?egress_refused: the egress guard refused 127\.0\.0\.2 /;

  for (const plane of ['dom_plane', 'computer_plane'] as const) {
    it(`${plane}: a meta refresh, a brain's NAVIGATE and a 302 to another host are refused; the run halts navigate_failed naming the host`, async () => {
      const brainAsked = fake.requests.length;
      const { run: r, life } = await run(plane, [
        { intent: 'open a page that refreshes to another host', type: 'navigate', url: `${site.url}/away/meta` },
        // the refresh fires on load; the wait step's final_url shows where it went
        { intent: 'let the page move', type: 'wait', seconds: 1.5 },
        { intent: 'leave the site for the other page', type: 'default-cua', max_steps: 4 },
        { intent: 'open a page that redirects to another host', type: 'navigate', url: `${site.url}/away/redirect`, required: true },
      ]);
      const steps = r.steps as Body[];
      expect(r.status, JSON.stringify(steps).slice(0, 1500)).to.equal('failed');
      expect(steps[1]!.final_url, 'the refresh went to the other host').to.include(`127.0.0.2:${other.port}/meta`);
      // the brain was told, as its observation, and chose DONE instead of a second try
      expect(steps[2]!.success, JSON.stringify(steps[2])).to.equal(true);
      const told = fake.requests.slice(brainAsked).map((q) => q.seen.text);
      expect(told.some((t) => /Last action refused: egress_refused: 127\.0\.0\.2 is outside the tenant's allowed_domains/.test(t)), told.join('\n---\n')).to.equal(true);
      expect(steps[3]!.success).to.equal(false);
      expect(steps[3]!.data).to.match(refusedOther);
      expect(life.halt_class).to.equal('navigate_failed');
      expect(life.failure_help.likely_causes[0]).to.match(/^the egress guard refused the host '127\.0\.0\.2'/);
      expect(other.hits, 'nothing reached the other host').to.deep.equal([]);
    });

    for (const via of ['link', 'popup'] as const) {
      it(`${plane}: a click on a ${via === 'link' ? 'link' : 'window.open button'} to another host fails the step navigate_failed and nothing reaches that host`, async () => {
        const { run: r, life } = await run(plane, [
          { intent: `open a page with a ${via} away`, type: 'navigate', url: `${site.url}/away/${via}` },
          { intent: 'press it', type: 'click', params: { x: 300, y: 200 } },
        ]);
        const steps = r.steps as Body[];
        expect(r.status, JSON.stringify(steps).slice(0, 1500)).to.equal('failed');
        expect(steps[1]!.success).to.equal(false);
        expect(steps[1]!.data).to.match(refusedOther);
        expect(steps[1]!.data).to.include(`/${via}`);
        expect(life.halt_class).to.equal('navigate_failed');
        expect(life.failure_help.likely_causes[0]).to.match(/^the egress guard refused the host '127\.0\.0\.2'/);
        expect(other.hits, 'nothing reached the other host').to.deep.equal([]);
      });
    }
  }
});
