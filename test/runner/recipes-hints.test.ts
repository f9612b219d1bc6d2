// Recipes and hints change what a run does (issue 16): required_fields drop
// partial rows, spam_indicators mark rows with hints.spam_label,
// listing_card_exclusions leave cards out, hints.layout single wants exactly
// one row, entity_name names the rows (prompt and rows metadata), and
// forbidden_controls refuse a click, submit or brain action before the browser
// acts (the fixture server counts every press), target_role resolves through
// the recipe's role map and falls back to the vision grounder, and
// rejection_intents answer a recognised intent with a rejection. Real gateway, agent and
// Chromium on dom_plane; the model is the local fake (a network boundary).
import { expect } from 'chai';
import { RUNNER_ENV, newToken, startGateway, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';
import { startFakeModel, type FakeModel, fakeBrainsDir } from '../support/fake-model.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const RECIPE = {
  name: 'flat-cards',
  schema: {
    schema_name: 'flats',
    entity_name: 'flat',
    item_selector: '.card',
    fields: [
      { name: 'title', type: 'str', selector: 'h2', required: true },
      { name: 'url', type: 'str', selector: 'a', attr: 'href' },
      { name: 'price', type: 'str', selector: '.price' },
    ],
    max_items: 20,
    required_fields: ['url'],
    spam_indicators: ['sponsored'],
    listing_card_exclusions: ['.ad-card', 'text:partner offer'],
    forbidden_controls: ['Delete account', '#wipe'],
    target_roles: { hit_button: '#hit', big_link: '#big' },
    rejection_intents: { 'close my account': 'page_blocked: this plan may not close accounts', purchase: 'runs never buy anything' },
  },
};

/** The same recipe without selectors: the model reads the rows. */
const { item_selector: _sel, target_roles: _roles, rejection_intents: _rejections, ...modelSchema } = RECIPE.schema;
const MODEL_RECIPE = { name: 'flat-model', schema: { ...modelSchema, fields: RECIPE.schema.fields.map(({ name, type, required }) => ({ name, type, ...(required ? { required } : {}) })) } };

describe('recipes and hints (real gateway, dom_plane)', function () {
  this.timeout(240_000);
  let gw: TestGateway;
  let site: Site;
  let fake: FakeModel;
  const token = newToken();

  before(async () => {
    [site, fake] = await Promise.all([startSite(), startFakeModel()]);
    const { dir, brainsPath: brains } = await fakeBrainsDir(fake, 'recipes');
    gw = await startGateway({
      dir,
      env: { ...RUNNER_ENV, SERVICE_BRAINS_PATH: brains },
      keys: { [token]: { tenant_id: 'recipes', rate_limit_per_minute: 0, max_concurrent_runs: 2, default_compute_backend: 'dom_plane' } },
    });
    for (const body of [RECIPE, MODEL_RECIPE]) {
      const r = await gw.req('POST', '/v1/recipes', { token, body });
      expect(r.status, r.text).to.equal(200);
    }
  });
  after(async () => {
    await gw.close();
    await Promise.all([site.close(), fake.close()]);
  });

  async function run(plan: unknown[]): Promise<Body> {
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: false, compute_backend: 'dom_plane' } });
    expect(r.status, r.text).to.equal(200);
    return r.body as Body;
  }
  const artifact = async (runId: string, name: string) => (await gw.req('GET', `/v1/runs/${runId}/artifacts/${name}`, { token })).body as Body;
  const presses = (id: string) => site.hits.get(`/recipes/press/${id}`) ?? 0;

  it('drops partial rows, leaves excluded cards out and marks spam with hints.spam_label, counted in extraction_quality', async () => {
    const r = await run([
      { intent: 'open the cards', type: 'navigate', url: `${site.url}/recipes/cards`, required: true },
      { intent: 'read the flats', type: 'extract_data', _recipe: 'flat-cards', hints: { spam_indicators: ['promoted'], spam_label: 'ad', layout: 'listings' } },
    ]);
    const step = r.steps[1] as Body;
    expect(step, JSON.stringify(step)).to.include({ success: true, rows: 3 });
    expect(step.data).to.match(/1 partial dropped \(required: title, url\)/);
    expect(step.data).to.match(/2 card\(s\) excluded by listing_card_exclusions/);
    expect(r.extraction_quality).to.deep.equal({ unknown_placeholder_row_count: 0, dropped_partial_row_count: 1, spam_row_count: 2, excluded_card_count: 2 });
    const rows = (await artifact(r.run_id, 'extracted_rows.json')) as unknown as Body[];
    expect(rows.map((x) => [x.title, x._label])).to.deep.equal([
      ['Flat A', null],
      ['Flat B', 'ad'],
      ['Flat F', 'ad'],
    ]);
    expect(rows[0]).to.not.have.property('_card_text');
    const meta = await artifact(r.run_id, 'extracted_rows.meta.json');
    expect(meta).to.deep.include({ entity_name: 'flat', row_count: 3 });
    expect(meta.extractions).to.deep.equal([{ path: 'steps[1]', schema_name: 'flats', entity_name: 'flat', rows: 3 }]);
  });

  it('labels spam "spam" by default, from the recipe indicators alone', async () => {
    const r = await run([
      { intent: 'open the cards', type: 'navigate', url: `${site.url}/recipes/cards`, required: true },
      { intent: 'read the flats', type: 'extract_data', _recipe: 'flat-cards' },
    ]);
    const rows = (await artifact(r.run_id, 'extracted_rows.json')) as unknown as Body[];
    expect(rows.map((x) => [x.title, x._label])).to.deep.equal([
      ['Flat A', null],
      ['Flat B', 'spam'],
      ['Flat F', null],
    ]);
    expect(r.extraction_quality.spam_row_count).to.equal(1);
  });

  it('hints.layout single wants exactly one row: one entity passes, a listing fails extractor_error', async () => {
    const r = await run([
      { intent: 'open the flat', type: 'navigate', url: `${site.url}/recipes/single`, required: true },
      { intent: 'read the flat', type: 'extract_data', _recipe: 'flat-cards', hints: { layout: 'single' } },
      { intent: 'open the cards', type: 'navigate', url: `${site.url}/recipes/cards` },
      { intent: 'read one flat from a listing', type: 'extract_data', _recipe: 'flat-cards', hints: { layout: 'single', entity_name: 'apartment' } },
    ]);
    const steps = r.steps as Body[];
    expect(steps[1], JSON.stringify(steps[1])).to.include({ success: true, rows: 1 });
    expect(steps[3], JSON.stringify(steps[3])).to.include({ success: false, failure_class: 'extractor_error', rows: 0 });
    expect(steps[3]!.data).to.match(/hints.layout single expects exactly one apartment, found 3/);
    const rows = (await artifact(r.run_id, 'extracted_rows.json')) as unknown as Body[];
    expect(rows.map((x) => x.title)).to.deep.equal(['Flat Solo']);
  });

  it('refuses a forbidden click or submit before the browser acts; an allowed control is pressed', async () => {
    const before = { danger: presses('danger'), wipe: presses('wipe'), submit: presses('wipe-submit'), keep: presses('keep') };
    const r = await run([
      { intent: 'open the account page', type: 'navigate', url: `${site.url}/recipes/controls`, required: true },
      { intent: 'delete the account by its label', type: 'click', _recipe: 'flat-cards', params: { label: 'Delete account' } },
      { intent: 'delete the account by its selector', type: 'click', _recipe: 'flat-cards', params: { selector: '#danger' } },
      { intent: 'erase everything', type: 'submit', _recipe: 'flat-cards', params: { label: 'Erase all' } },
      { intent: 'keep the account', type: 'click', _recipe: 'flat-cards', params: { selector: '#keep' } },
    ]);
    const steps = r.steps as Body[];
    for (const i of [1, 2, 3]) {
      expect(steps[i], JSON.stringify(steps[i])).to.include({ success: false, failure_class: 'wrong_target', attempts: 1 });
      expect(steps[i]!.data).to.match(/^forbidden_control: (CLICK) on .* refused before acting/);
    }
    expect(steps[4], JSON.stringify(steps[4])).to.include({ success: true });
    expect(steps[1]!.data).to.match(/label "Delete account"/);
    expect(steps[2]!.data).to.match(/button#danger "Delete account".*entry "Delete account"/);
    expect(steps[3]!.data).to.match(/button#wipe "Erase all".*entry "#wipe"/);
    // give a press that did happen time to reach the server before counting
    await new Promise((res) => setTimeout(res, 500));
    expect(presses('keep') - before.keep, 'the allowed control is pressed').to.equal(1);
    expect({ danger: presses('danger') - before.danger, wipe: presses('wipe') - before.wipe, submit: presses('wipe-submit') - before.submit }).to.deep.equal({ danger: 0, wipe: 0, submit: 0 });
  });

  it("refuses a brain's click on a forbidden control before the browser acts", async () => {
    const before = presses('big-danger');
    const r = await run([
      { intent: 'open the danger page', type: 'navigate', url: `${site.url}/recipes/big-danger`, required: true },
      { intent: 'hit the button', type: 'default-cua', _recipe: 'flat-cards', max_steps: 3 },
    ]);
    const step = r.steps[1] as Body;
    expect(step, JSON.stringify(step)).to.include({ success: false, failure_class: 'wrong_target', attempts: 1 });
    expect(step.data).to.match(/^forbidden_control: CLICK on button#danger "Delete account" refused before acting/);
    await new Promise((res) => setTimeout(res, 500));
    expect(presses('big-danger') - before).to.equal(0);
  });

  it('gives an extract block without max_items one meaning on both paths: a single row, mechanical and model alike', async () => {
    fake.requests.length = 0;
    fake.script = (seen) => (seen.text.includes('"rows"') ? { text: '{"rows": [{"title": "Flat A"}]}' } : { text: 'no' });
    const fields = [{ name: 'title', type: 'str', selector: 'h2', required: true }];
    try {
      const r = await run([
        { intent: 'open the cards', type: 'navigate', url: `${site.url}/recipes/cards`, required: true },
        { intent: 'read the flat', type: 'extract_data', extract: { schema_name: 'by_selector', item_selector: '.card', fields } },
        { intent: 'read the flat', type: 'extract_data', extract: { schema_name: 'by_model', fields: [{ name: 'title', type: 'str', required: true }] } },
        { intent: 'read two flats', type: 'extract_data', extract: { schema_name: 'two', item_selector: '.card', max_items: 2, fields } },
      ]);
      const steps = r.steps as Body[];
      expect(steps[1], JSON.stringify(steps[1])).to.include({ success: true, rows: 1 });
      expect(steps[2], JSON.stringify(steps[2])).to.include({ success: true, rows: 1 });
      expect(steps[3], JSON.stringify(steps[3])).to.include({ success: true, rows: 2 });
      const asked = fake.requests.filter((q) => q.seen.text.includes('"rows"')).map((q) => q.seen.text);
      expect(asked).to.have.length(1);
      expect(asked[0]).to.include('exactly one row');
      const rows = (await artifact(r.run_id, 'extracted_rows.json')) as unknown as Body[];
      expect(rows.map((x) => x.title)).to.deep.equal(['Flat A', 'Flat A', 'Flat A', 'Flat B']);
    } finally {
      fake.script = undefined;
    }
  });

  it('names the entity in the model extraction prompt (hints.entity_name over the recipe) and in the rows metadata', async () => {
    fake.requests.length = 0;
    fake.script = (seen) => (seen.text.includes('"rows"') ? { text: '{"rows": [{"title": "Flat Solo", "url": "/item/solo", "price": "100 EUR"}]}' } : { text: 'no' });
    try {
      const r = await run([
        { intent: 'open the flat', type: 'navigate', url: `${site.url}/recipes/single`, required: true },
        { intent: 'read the flat', type: 'extract_data', _recipe: 'flat-model', hints: { layout: 'single', entity_name: 'apartment' } },
        { intent: 'read the flats', type: 'extract_data', _recipe: 'flat-model' },
      ]);
      expect(r.steps[1], JSON.stringify(r.steps[1])).to.include({ success: true, rows: 1 });
      expect(r.steps[2], JSON.stringify(r.steps[2])).to.include({ success: true, rows: 1 });
      const asked = fake.requests.filter((q) => q.seen.text.includes('"rows"')).map((q) => q.seen.text);
      expect(asked).to.have.length(2);
      expect(asked[0]).to.include('The page shows one apartment; each row is one apartment.');
      expect(asked[0]).to.include('exactly one row, for the one apartment the page shows');
      expect(asked[0]).to.include('Skip any card whose text contains "partner offer"');
      expect(asked[1]).to.include('The page shows flat entries; each row is one flat.');
      expect(asked[1]).to.include('up to 20 rows, one per flat on the screen');
      const meta = await artifact(r.run_id, 'extracted_rows.meta.json');
      expect(meta).to.deep.include({ entity_name: 'apartment', row_count: 2 });
      expect(meta.extractions.map((e: Body) => e.entity_name)).to.deep.equal(['apartment', 'flat']);
    } finally {
      fake.script = undefined;
    }
  });

  it('resolves target_role through the recipe role map, and grounds a role without an entry by vision', async () => {
    fake.requests.length = 0;
    const hits = site.hits.get('/hit') ?? 0;
    const r = await run([
      { intent: 'open the counter', type: 'navigate', url: `${site.url}/counter`, required: true },
      { intent: 'press the counter button', type: 'click', _recipe: 'flat-cards', target_role: 'hit_button' },
      { intent: 'hit the vote button', type: 'click', _recipe: 'flat-cards', target_role: 'vote_button' },
    ]);
    const steps = r.steps as Body[];
    expect(steps[1], JSON.stringify(steps[1])).to.include({ success: true });
    expect(steps[1]!.last_action.reasoning).to.equal('click via target_role hit_button (#hit)');
    expect(steps[2], JSON.stringify(steps[2])).to.include({ success: true });
    expect(steps[2]!.last_action.reasoning).to.equal('click via grounding by default-cua');
    // only the role without an entry asked the model
    expect(fake.requests.map((q) => q.seen.text).filter((t) => t.includes('Click the target of this step'))).to.have.length(1);
    expect(fake.requests).to.have.length(1);
    await new Promise((res) => setTimeout(res, 300));
    expect((site.hits.get('/hit') ?? 0) - hits).to.equal(2);
  });

  it('capture_link_in_new_tab finds its source by selector, by target_role through the recipe, and by vision when neither names an element', async () => {
    fake.requests.length = 0;
    const r = await run([
      { intent: 'open the big link page', type: 'navigate', url: `${site.url}/bigtab`, required: true },
      { intent: 'capture the big link', type: 'capture_link_in_new_tab', source_selector: '#big' },
      { intent: 'capture the big link', type: 'capture_link_in_new_tab', _recipe: 'flat-cards', target_role: 'big_link', emit: 'current_url_title' },
      { intent: 'hit the link to page three', type: 'capture_link_in_new_tab', source_selector: 'the link to page three' },
      { intent: 'hit the comments link', type: 'capture_link_in_new_tab', _recipe: 'flat-cards', target_role: 'comments_link', emit: 'current_url_title' },
    ]);
    const steps = r.steps as Body[];
    expect(steps.map((s) => [s.success, s.failure_class ?? null]), JSON.stringify(steps)).to.deep.equal([
      [true, null],
      [true, null],
      [true, null],
      [true, null],
      [true, null],
    ]);
    expect(steps[1]!.last_action.reasoning).to.equal('capture_link_in_new_tab via selector #big');
    expect(steps[2]!.last_action.reasoning).to.equal('capture_link_in_new_tab via target_role big_link (#big)');
    expect(steps[3]!.last_action.reasoning).to.match(/^capture_link_in_new_tab via grounding by default-cua at \(\d+, \d+\)$/);
    expect(steps[4]!.last_action.reasoning).to.match(/^capture_link_in_new_tab via grounding by default-cua/);
    // only the two without an element asked the model
    expect(fake.requests.filter((q) => q.seen.text.includes('Click the target of this step'))).to.have.length(2);
    const rows = (await artifact(r.run_id, 'extracted_rows.json')) as unknown as Body[];
    // each step captured the link's page; the run's rows keep it once
    expect(steps.slice(1).map((s) => s.rows), JSON.stringify(steps)).to.deep.equal([1, 1, 1, 1]);
    expect([...new Set(rows.map((x) => x.url))]).to.deep.equal([`${site.url}/list?page=3`]);
    // the source tab is the one left active
    expect(steps[4]!.final_url).to.equal(`${site.url}/bigtab`);
  });

  it('answers a step intent or a brain action that rejection_intents recognise with their rejection, before the browser acts', async () => {
    const keep = presses('keep');
    const r = await run([
      { intent: 'open the account page', type: 'navigate', url: `${site.url}/recipes/controls`, required: true },
      { intent: 'Close my account by pressing keep', type: 'click', _recipe: 'flat-cards', params: { selector: '#keep' } },
    ]);
    expect(r).to.include({ status: 'failed', error: 'page_blocked' });
    expect(r.steps[1], JSON.stringify(r.steps[1])).to.include({ success: false, attempts: 1 });
    expect(r.steps[1].data).to.match(/^halted \(page_blocked\): rejected_intent "close my account": this plan may not close accounts/);
    const life = (await gw.req('GET', `/v1/runs/${r.run_id}`, { token })).body as Body;
    expect(life.halt_class).to.equal('page_blocked');

    const hits = site.hits.get('/hit') ?? 0;
    fake.script = () => ({ call: { action: 'CLICK', x: 200, y: 200, reasoning: 'I will purchase the flat with this button' } });
    try {
      const b = await run([
        { intent: 'open the counter', type: 'navigate', url: `${site.url}/counter`, required: true },
        { intent: 'get the flat', type: 'default-cua', _recipe: 'flat-cards', max_steps: 3 },
      ]);
      expect(b.steps[1].data).to.match(/^halted \(intent_rejected\): rejected_intent "purchase": runs never buy anything/);
      const bl = (await gw.req('GET', `/v1/runs/${b.run_id}`, { token })).body as Body;
      expect(bl.halt_class).to.equal('intent_rejected');
    } finally {
      fake.script = undefined;
    }
    await new Promise((res) => setTimeout(res, 300));
    expect(presses('keep') - keep).to.equal(0);
    expect((site.hits.get('/hit') ?? 0) - hits).to.equal(0);
  });
});
