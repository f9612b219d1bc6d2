// Run-level rows of the spec, each in a run on dom_plane through the gateway
// (issue 40): hosted_only, off_source_step_budget 0, the extract_data_failed
// halt, the run error `timeout`, and the default failure_help of a halt class
// the catalogue does not know. The only brain is hosted-api on the local fake
// model server (OpenAI wire format). One gateway; real agent and Chromium.
import { expect } from 'chai';
import { RUNNER_ENV, newToken, startGateway, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';
import { fakeBrainsDir, startFakeModel, type FakeModel } from '../support/fake-model.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const shape = (steps: Body[]) => steps.map((s) => [s.type, s.success, s.failure_class ?? null]);
const SURFACES = ['events', 'trace', 'logs', 'phase', 'status', 'result'];

describe('run-level rows on dom_plane (real gateway, agent and Chromium; hosted model on a fake server)', function () {
  this.timeout(120_000);
  const token = newToken();
  let site: Site;
  let other: Site;
  let fake: FakeModel;
  let gw: TestGateway;

  before(async () => {
    [other, fake] = await Promise.all([startSite(), startFakeModel()]);
    site = await startSite(`${other.url}/`);
    // the hosted model reads rows it was asked for, and holds that what it is asked holds
    fake.script = (seen) => {
      if (seen.text.includes('"rows"') && seen.text.includes('- url (')) return { text: '{"rows": [{"url": "https://seen.example/by-the-model", "title": "Seen"}]}' };
      if (seen.text.includes('"rows"')) return { text: '{"rows": [{"title": "Read by the hosted model"}]}' };
      if (seen.text.includes('Does this hold')) return { text: '{"holds": true, "reason": "it does"}' };
      return { text: 'no' };
    };
    const { dir, brainsPath } = await fakeBrainsDir(fake, 'rows', { 'hosted-api': { protocol: 'hosted-api', base_url: fake.url, model: 'fake-hosted' } });
    gw = await startGateway({ dir, env: { ...RUNNER_ENV, SERVICE_BRAINS_PATH: brainsPath }, keys: { [token]: { tenant_id: 'runrows', rate_limit_per_minute: 0, default_compute_backend: 'dom_plane' } } });
  });
  after(async () => {
    await gw.close();
    await Promise.all([site.close(), other.close(), fake.close()]);
  });

  async function run(plan: unknown, extra: Body = {}): Promise<Body> {
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: false, ...extra } });
    expect(r.status, r.text).to.equal(200);
    const [life, rows] = await Promise.all([gw.req('GET', `/v1/runs/${r.body.run_id}`, { token }), gw.req('GET', `/v1/runs/${r.body.run_id}/artifacts/extracted_rows.json`, { token })]);
    return { ...r.body, life: life.body, rows: rows.status === 200 ? rows.body : [] };
  }

  it('hosted_only: the hosted model reads the rows though selectors or the DOM could, and judges a hosted_only gate', async () => {
    fake.requests.length = 0;
    const extract = { schema_name: 'flats', item_selector: '.card', max_items: 5, fields: [{ name: 'title', type: 'str', selector: 'h2', required: true }] };
    const r = await run([
      { intent: 'open the listings', type: 'navigate', url: `${site.url}/list?page=1`, required: true },
      { intent: 'read the flats with the hosted model', type: 'extract_data', hosted_only: true, extract },
      { intent: 'read the flats from the page', type: 'extract_data', extract: { ...extract, schema_name: 'mechanical' } },
      { intent: 'read the address with the hosted model', type: 'extract_url', hosted_only: true },
      { intent: 'the listings are there', type: 'wait', seconds: 0, gate: true, hosted_only: true, verify: 'the page lists flats' },
    ]);
    expect(shape(r.steps), JSON.stringify(r.steps)).to.deep.equal([
      ['navigate', true, null],
      ['extract_data', true, null],
      ['extract_data', true, null],
      ['extract_url', true, null],
      ['wait', true, null],
    ]);
    expect(r.steps[1].data).to.match(/read by hosted-api$/);
    // the hosted_only steps' rows came from the model; the same block without it read the page's three cards
    expect((r.rows as Body[]).map((x) => x.title)).to.deep.equal(['Read by the hosted model', 'Flat 1', 'Flat 2', 'Flat 3', 'Seen']);
    expect((r.rows as Body[]).at(-1)!.url).to.equal('https://seen.example/by-the-model');
    expect(fake.requests.map((q) => [q.body.model, q.headers.authorization, q.seen.text.includes('Does this hold') ? 'verify' : 'rows'])).to.deep.equal([
      ['fake-hosted', 'Bearer sk-rows', 'rows'],
      ['fake-hosted', 'Bearer sk-rows', 'rows'],
      ['fake-hosted', 'Bearer sk-rows', 'verify'],
    ]);
    expect(fake.requests[0]!.seen.image).to.deep.equal({ width: 1280, height: 720 });
  });

  it('off_source_step_budget 0 disables the drift guard whatever the pattern', async () => {
    const r = await run({
      steps: [
        { intent: 'open the source', type: 'navigate', url: `${site.url}/offsite` },
        { intent: 'follow the link away', type: 'click', params: { selector: '#away' } },
        { intent: 'wait there', type: 'wait', seconds: 0 },
        { intent: 'and wait more', type: 'wait', seconds: 0 },
        { intent: 'read where we are', type: 'extract_url' },
      ],
      runtime: { pinned_source_url_pattern: site.url, off_source_step_budget: 0 },
    });
    expect(r.status, JSON.stringify(r.steps)).to.equal('succeeded');
    expect(r.steps).to.have.length(5);
    expect((r.rows as Body[])[0]!.url).to.equal(`${other.url}/static`);
    expect(r.life.halt_class ?? null).to.equal(null);
  });

  it('a required extract_data that reads nothing halts with extract_data_failed (run error extract_failed)', async () => {
    const r = await run([
      { intent: 'open the listings', type: 'navigate', url: `${site.url}/list?page=1` },
      { intent: 'read cards that are not there', type: 'extract_data', required: true, extract: { schema_name: 'none', item_selector: '.no-such-card', max_items: 5, fields: [{ name: 'title', type: 'str', selector: 'h2' }] } },
      { intent: 'never reached', type: 'extract_url' },
    ]);
    expect(shape(r.steps), JSON.stringify(r.steps)).to.deep.equal([
      ['navigate', true, null],
      ['extract_data', false, 'extractor_error'],
    ]);
    expect(r.steps[1].attempts).to.equal(2);
    expect(r.status).to.equal('failed');
    expect(r.error).to.equal('extract_failed');
    expect(r.life).to.include({ phase: 'halted', halt_class: 'extract_data_failed' });
    expect(r.life.failure_help).to.include({ halt_class: 'extract_data_failed', retries_spent: 1 });
  });

  it('a run past max_time_minutes fails with the run error timeout', async () => {
    const r = await run([{ intent: 'open', type: 'navigate', url: `${site.url}/static` }, { intent: 'wait too long', type: 'wait', seconds: 60 }], { max_time_minutes: 0.25 });
    expect(r.status).to.equal('failed');
    expect(r.error).to.equal('timeout');
    expect(r.life.halt_class).to.equal('time_cap');
    expect(r.steps[1]).to.include({ type: 'wait', success: false, failure_class: 'budget_exceeded' });
  });

  it('a halt class the catalogue does not know gets the default failure_help, debug surfaces included', async () => {
    // a recipe's rejection_intents may name any halt class
    const extract = { fields: [{ name: 'url', type: 'str' }], rejection_intents: { 'buy ': 'purchase_refused: this plan may not buy anything' } };
    const r = await run([
      { intent: 'open the listings', type: 'navigate', url: `${site.url}/list?page=1` },
      { intent: 'buy the first flat', type: 'extract_url', extract },
      { intent: 'never reached', type: 'extract_url' },
    ]);
    expect(r.status).to.equal('failed');
    expect(r.steps).to.have.length(2);
    expect(r.steps[1].data).to.match(/this plan may not buy anything/);
    const help = r.life.failure_help as Body;
    expect(r.life.halt_class).to.equal('purchase_refused');
    expect(help.halt_class).to.equal('purchase_refused');
    expect(help.summary).to.equal('The run halted for a reason this service has no specific advice for.');
    expect(help.likely_causes).to.be.an('array').with.length.greaterThan(0);
    expect(help.next_steps).to.include('read the events and logs of the run');
    expect(Object.keys(help.debug_surfaces).sort()).to.deep.equal([...SURFACES].sort());
    expect(help.debug_surfaces.events).to.equal(`/v1/runs/${r.run_id}/events`);
    expect(help.debug_surfaces.result).to.equal(`/v1/runs/${r.run_id}/result`);
    expect(help.retries_spent).to.equal(0);
  });
});
