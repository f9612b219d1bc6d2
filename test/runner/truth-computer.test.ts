// Issue 12 on computer_plane (real agent, Xvfb, xdotool, Chromium): the runner
// sees the page through the page facts the agent learns from DevTools events
// (never from the page): every step has final_url and page_title, a navigation
// that did not load fails with its class, the hints URL contract and the
// drift guard work, and a 404 is http_4xx.
import { expect } from 'chai';
import { newToken, startGateway, type TestGateway } from '../support/gateway.ts';
import { freePort } from '../support/redis.ts';
import { startSite, type Site } from '../support/site.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('runs tell the truth on computer_plane (page facts)', function () {
  this.timeout(240_000);
  let gw: TestGateway;
  let site: Site;
  const token = newToken();

  before(async () => {
    site = await startSite();
    gw = await startGateway({
      env: { SERVICE_RUNNER: 'on', SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1' },
      keys: { [token]: { tenant_id: 'desk', rate_limit_per_minute: 0, max_concurrent_runs: 2, default_compute_backend: 'computer_plane' } },
    });
  });
  after(async () => {
    await gw.close();
    await site.close();
  });

  async function run(plan: unknown, extra: Body = {}): Promise<{ run: Body; life: Body }> {
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: false, compute_backend: 'computer_plane', ...extra } });
    expect(r.status, r.text).to.equal(200);
    return { run: r.body, life: (await gw.req('GET', `/v1/runs/${r.body.run_id}`, { token })).body };
  }

  it('gives every step its final_url and page_title across two navigations, and keeps the drift guard quiet on the right site', async () => {
    const { run: r, life } = await run(
      {
        steps: [
          { intent: 'open the listings', type: 'navigate', url: `${site.url}/list?page=1`, required: true },
          { intent: 'go to page 2', type: 'navigate', url: `${site.url}/list?page=2`, required: true },
        ],
        runtime: { pinned_source_url_pattern: site.url, off_source_step_budget: 1 },
      },
    );
    expect(r.status, JSON.stringify(life)).to.equal('succeeded');
    const [first, second] = r.steps as Body[];
    expect(first!.final_url).to.equal(`${site.url}/list?page=1`);
    expect(first!.page_title).to.equal('Listings page 1');
    expect(first!.data).to.equal('HTTP 200');
    expect(second!.final_url).to.equal(`${site.url}/list?page=2`);
    expect(second!.page_title).to.equal('Listings page 2');
  });

  it('halts off_source_drift when the run is off the pinned site (the guard now sees the URL)', async () => {
    const { run: r, life } = await run({
      steps: [
        { intent: 'open the listings', type: 'navigate', url: `${site.url}/list?page=1` },
        { intent: 'open page 2', type: 'navigate', url: `${site.url}/list?page=2` },
      ],
      runtime: { pinned_source_url_pattern: 'https://shop.example.org', off_source_step_budget: 1 },
    });
    expect(r.status).to.equal('failed');
    expect(life.halt_class).to.equal('off_source_drift');
  });

  it('fails a navigate to a 404 with http_4xx and halts navigate_failed', async () => {
    const { run: r, life } = await run([{ intent: 'open a missing page', type: 'navigate', url: `${site.url}/missing`, required: true }]);
    expect(r.status).to.equal('failed');
    expect(r.steps.at(-1).failure_class).to.equal('http_4xx');
    expect(r.steps.at(-1).data).to.match(/HTTP 404/);
    expect(life.halt_class).to.equal('navigate_failed');
    expect(life.failure_help.halt_class).to.equal('navigate_failed');
  });

  it('never reports success for a navigation that did not load: refused (http_5xx) and unresolvable (http_4xx), with the browser error', async () => {
    const refused = await run([{ intent: 'open a closed port', type: 'navigate', url: `http://127.0.0.1:${await freePort()}/`, required: true }]);
    expect(refused.run.status).to.equal('failed');
    expect(refused.run.steps.at(-1).failure_class, refused.run.steps.at(-1).data).to.equal('http_5xx');
    expect(refused.run.steps.at(-1).data).to.match(/net::ERR_CONNECTION_REFUSED/);
    expect(refused.life.halt_class).to.equal('navigate_failed');
    const unresolved = await run([{ intent: 'open a name that does not exist', type: 'navigate', url: 'http://nohost.test/', required: true }]);
    expect(unresolved.run.status).to.equal('failed');
    expect(unresolved.run.steps.at(-1).failure_class, unresolved.run.steps.at(-1).data).to.equal('http_4xx');
    expect(unresolved.run.steps.at(-1).data).to.match(/net::ERR_NAME_NOT_RESOLVED/);
    expect(unresolved.run.steps.at(-1).final_url).to.equal('http://nohost.test/');
  });

  it('fails a navigate the address bar turns into a search (a .invalid name) as http_4xx, never as the search page', async () => {
    const searched = await run([{ intent: 'open a reserved name', type: 'navigate', url: 'https://nohost.invalid/', required: true }]);
    const step = searched.run.steps.at(-1);
    expect(searched.run.status).to.equal('failed');
    expect(step.failure_class, step.data).to.equal('http_4xx');
    // the address bar sends the reserved name to a search (told as TYPED_URL_MISMATCH), or, as it once did on a
    // loaded CI host, lets the browser try the name (a name error): either way the step fails, never succeeds
    expect(step.data).to.match(/TYPED_URL_MISMATCH.*the address bar sent the browser to https?:\/\/[^ ]*nohost\.invalid|^navigation to https:\/\/nohost\.invalid\/ failed: (net::)?ERR_NAME_(NOT_RESOLVED|RESOLUTION_FAILED)/);
    // final_url is where the browser is: after a search, the search page, not the step's URL
    if (/TYPED_URL_MISMATCH/.test(step.data)) expect(step.final_url).to.not.equal('https://nohost.invalid/');
  });

  it('checks the hints URL contract on computer_plane: wrong_target when the page is not where the step expects', async () => {
    const { run: r } = await run([
      { intent: 'open the listings', type: 'navigate', url: `${site.url}/list?page=1`, required: true },
      { intent: 'click an empty spot', type: 'click', params: { x: 1100, y: 650 }, hints: { expect_url_contains: ['/item/'] } },
    ]);
    const step = (r.steps as Body[]).find((s) => s.type === 'click')!;
    expect(step.success, JSON.stringify(step).slice(0, 300)).to.equal(false);
    expect(step.failure_class).to.equal('wrong_target');
    expect(step.data).to.include(`${site.url}/list?page=1`);
  });

  it('checks expect_text_present on computer_plane from a DOM snapshot the browser takes: held, and broken (submit_failed)', async () => {
    const { run: r } = await run([
      { intent: 'open the desk', type: 'navigate', url: `${site.url}/desk`, required: true },
      { intent: 'click an empty spot', type: 'click', params: { x: 1100, y: 650 }, hints: { expect_text_present: 'Saved at the desk!' } },
      { intent: 'save', type: 'click', params: { x: 300, y: 200 }, hints: { expect_text_present: ['Saved at the   desk!'] } },
    ]);
    const steps = r.steps as Body[];
    expect(steps.map((s) => [s.type, s.success, s.failure_class ?? null]), JSON.stringify(steps).slice(0, 800)).to.deep.equal([
      ['navigate', true, null],
      ['click', false, 'submit_failed'],
      ['click', true, null],
    ]);
    expect(steps[1]!.data).to.equal('expected text did not appear after the action');
  });
});
