import { expect } from 'chai';
import path from 'node:path';
import { RUNNER_ENV, startGateway, newToken, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const examples = path.resolve(import.meta.dirname, '../../examples/plugins');

describe('the example plugins in a run (SERVICE_PLUGINS_DIR=examples/plugins, real agent, real Chromium)', function () {
  this.timeout(120_000);
  const token = newToken();
  let site: Site;
  let gw: TestGateway;
  before(async () => {
    [site, gw] = await Promise.all([startSite(), startGateway({ env: { ...RUNNER_ENV, SERVICE_PLUGINS_DIR: examples }, keys: { [token]: { tenant_id: 'ops', rate_limit_per_minute: 0, default_compute_backend: 'dom_plane' } } })]);
  });
  after(async () => {
    await gw.close();
    await site.close();
  });

  it('loads each example as an operator plugin and offers the example brain id', async () => {
    const list = (await gw.req('GET', '/v1/plugins', { token })).body.plugins as Body[];
    const operator = Object.fromEntries(list.filter((p) => p.source === 'operator').map((p) => [p.name, p.registered]));
    expect(operator).to.have.all.keys('example-assert-text', 'example-recipes', 'example-scripted-brain', 'example-word-count');
    expect(operator['example-assert-text'].step_types).to.deep.equal(['assert_text']);
    expect(operator['example-recipes'].recipes).to.deep.equal(['example-cards']);
    expect(operator['example-scripted-brain']).to.deep.include({ brains: ['scripted-cua'], step_types: ['brain_task'] });
    expect(operator['example-word-count'].host_tools).to.deep.equal(['word_count']);
    const models = (await gw.req('GET', '/v1/models')).body.data.map((m: Body) => m.id);
    expect(models).to.include('scripted-cua');
    expect((await gw.req('GET', '/v1/recipes/example-cards', { token })).body.schema.item_selector).to.equal('.card');
  });

  it('runs the example step handler, host tool, brain and recipe in one plan', async () => {
    const plan = [
      { intent: 'open the listings', type: 'navigate', url: `${site.url}/list?page=1`, required: true },
      { intent: 'the first cards are listed', type: 'assert_text', params: { text: ['Flat 1', 'Flat 3'] } },
      { intent: 'a card that is not there', type: 'assert_text', params: { text: 'Flat 99' } },
      { intent: 'count the words', type: 'tool_call', name: 'word_count', args: { text: 'one two  three' } },
      { intent: 'count nothing', type: 'tool_call', name: 'word_count', args: { words: 3 } },
      { intent: 'call a tool nobody registered', type: 'tool_call', name: 'no_such_tool', args: {} },
      { intent: 'scroll down the list', type: 'brain_task', max_steps: 3 },
      { intent: 'read the cards', type: 'extract_data', _recipe: 'example-cards' },
    ];
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: false, cua_model: 'scripted-cua' } });
    expect(r.status, r.text).to.equal(200);
    const steps = r.body.steps as Body[];
    expect(r.body.status, JSON.stringify(steps)).to.equal('succeeded');
    expect(steps.map((s) => [s.type, s.success])).to.deep.equal([
      ['navigate', true],
      ['assert_text', true],
      ['assert_text', false],
      ['tool_call', true],
      ['tool_call', false],
      ['tool_call', false],
      ['brain_task', true],
      ['extract_data', true],
    ]);
    expect(steps[2]).to.include({ failure_class: 'wrong_target', data: 'not on the page: "Flat 99"' });
    expect(JSON.parse(steps[3]!.data)).to.deep.equal({ words: 3, run_id: r.body.run_id });
    expect(steps[4]).to.include({ data: "args of host tool 'word_count' are invalid: args.text: is required", attempts: 1 });
    expect(steps[5]).to.include({ data: "no host tool named 'no_such_tool' is registered", attempts: 1 });
    expect(steps[6]!.data).to.equal('done after 1 action(s)');
    expect(steps[6]!.last_action).to.deep.equal({ type: 'DONE', params: { success: true }, reasoning: 'the scripted action is done' });
    expect(r.body.summary).to.match(/cost 0\.0020 USD/);
    const rows = (await gw.req('GET', `/v1/runs/${r.body.run_id}/artifacts/extracted_rows.json`, { token })).body as Body[];
    expect(rows).to.deep.equal([
      { title: 'Flat 1', url: `${site.url}/item/1`, price: 100.5 },
      { title: 'Flat 2', url: `${site.url}/item/2`, price: 200.5 },
      { title: 'Flat 3', url: `${site.url}/item/3`, price: 300.5 },
    ]);
  });

  it('reads declarations: a brain step without the brain is refused at submission; extract_data without a schema halts with no_schema_configured', async () => {
    const plan = [
      { intent: 'open the listings', type: 'navigate', url: `${site.url}/list?page=1` },
      { intent: 'scroll down the list', type: 'brain_task', max_steps: 3 },
      { intent: 'read something', type: 'extract_data' },
      { intent: 'never reached', type: 'done' },
    ];
    const refused = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: false, cua_model: 'default-cua' } });
    expect(refused.status).to.equal(404);
    expect(refused.body.detail).to.match(/^plan\[1\] \(brain_task\) needs a brain, and the model 'default-cua' is accepted but not served/);
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan: plan.filter((p) => p.type !== 'brain_task'), detached: false } });
    const life = (await gw.req('GET', `/v1/runs/${r.body.run_id}`, { token })).body;
    expect(life).to.include({ status: 'failed', halt_class: 'no_schema_configured' });
    expect(r.body.error).to.equal('extract_failed');
    const steps = r.body.steps as Body[];
    // the step that halted the run has its entry, saying why
    expect(steps.map((s) => s.type)).to.deep.equal(['navigate', 'extract_data']);
    expect(steps[1]).to.include({ success: false, failure_class: 'extractor_error', attempts: 1 });
    expect(steps[1]!.data).to.match(/^halted \(no_schema_configured\): step type 'extract_data' needs an extraction schema/);
    expect(r.body.summary).to.match(/halted: step type 'extract_data' needs an extraction schema: an extract block or a _recipe$/);
  });
});
