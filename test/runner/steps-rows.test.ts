// The step rows of the spec, each in a run on dom_plane through the gateway
// (issue 40): every action's effect is observed on the page, which writes what
// it received into its own DOM for an extract to read back (test/support/rows-pages.ts).
// One gateway and the local agents it starts; real Chromium.
import { expect } from 'chai';
import { RUNNER_ENV, newToken, startGateway, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** An extract_data step that reads every element of `selector` as one row {text}. */
const readAll = (schema: string, selector: string) => ({ intent: `read ${selector}`, type: 'extract_data', extract: { schema_name: schema, item_selector: selector, max_items: 50, fields: [{ name: 'text', type: 'str' }] } });
const shape = (steps: Body[]) => steps.map((s) => [s.type, s.success, s.failure_class ?? null]);

describe('step rows in runs on dom_plane (real gateway, agent and Chromium)', function () {
  this.timeout(180_000);
  const token = newToken();
  let site: Site;
  let gw: TestGateway;

  before(async () => {
    site = await startSite();
    gw = await startGateway({ env: { ...RUNNER_ENV }, keys: { [token]: { tenant_id: 'rows', rate_limit_per_minute: 0, default_compute_backend: 'dom_plane' } } });
  });
  after(async () => {
    await gw.close();
    await site.close();
  });

  async function run(plan: unknown, extra: Body = {}): Promise<Body> {
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: false, ...extra } });
    expect(r.status, r.text).to.equal(200);
    const [life, rows] = await Promise.all([gw.req('GET', `/v1/runs/${r.body.run_id}`, { token }), gw.req('GET', `/v1/runs/${r.body.run_id}/artifacts/extracted_rows.json`, { token })]);
    return { ...r.body, life: life.body, rows: rows.status === 200 ? rows.body : [] };
  }

  it('double_click, right_click, filter, drag, key_press, select_option and scroll each reach the page', async () => {
    const r = await run([
      { intent: 'open the play page', type: 'navigate', url: `${site.url}/rows/play`, required: true },
      { intent: 'double-click the green box', type: 'double_click', params: { label: 'Double me' } },
      { intent: 'open the context menu on the red box', type: 'right_click', params: { label: 'Menu here' } },
      { intent: 'show flats only', type: 'filter', params: { label: 'Flats only' } },
      { intent: 'drag along the blue track', type: 'drag', params: { x: 60, y: 130, to_x: 360, to_y: 150 } },
      { intent: 'press escape', type: 'key_press', params: { keys: 'Escape' } },
      { intent: 'choose the large size', type: 'select_option', params: { dropdown_label: 'Size', option_label: 'Large' } },
      { intent: 'scroll down the page', type: 'scroll', params: { direction: 'down', amount: 5 } },
      readAll('log', '#log li'),
      readAll('at', '#at'),
    ]);
    expect(shape(r.steps), JSON.stringify(r.steps)).to.deep.equal([
      ['navigate', true, null],
      ['double_click', true, null],
      ['right_click', true, null],
      ['filter', true, null],
      ['drag', true, null],
      ['key_press', true, null],
      ['select_option', true, null],
      ['scroll', true, null],
      ['extract_data', true, null],
      ['extract_data', true, null],
    ]);
    expect(r.status).to.equal('succeeded');
    const rows = r.rows as Body[];
    // each action's effect, in order; the drag is real input from the press point to the release point
    expect(rows.slice(0, -1).map((x) => x.text)).to.deep.equal(['dblclick', 'contextmenu', 'filter flats', 'drag 300,20 trusted', 'key Escape', 'size Large', 'scrolled']);
    expect(Number(rows.at(-1)!.text), 'the page scrolled down').to.be.greaterThan(0);
    expect(r.steps[4].last_action).to.deep.include({ type: 'DRAG' });
  });

  it('navigate_back returns to the page before; wait_after_load_seconds waits after load; wait_for_load false does not wait for a load that never completes', async () => {
    const r = await run([
      { intent: 'open page 1', type: 'navigate', url: `${site.url}/list?page=1` },
      { intent: 'open page 2', type: 'navigate', url: `${site.url}/list?page=2` },
      { intent: 'go back', type: 'navigate_back' },
      { intent: 'where are we', type: 'extract_url' },
      // the page says "ready" 1.5 s after its load; the step waits 3 s after the load before it ends
      { intent: 'open the delayed page and give it time', type: 'navigate', url: `${site.url}/rows/delayed`, params: { wait_after_load_seconds: 3 } },
      readAll('state', '#state'),
      // its image is never answered: the load never completes (waiting for it is a nav_timeout after 30 s, twice)
      { intent: 'open the page that never finishes loading', type: 'navigate', url: `${site.url}/rows/slowload`, wait_for_load: false, required: true },
      readAll('parsed', '#state'),
    ]);
    expect(shape(r.steps), JSON.stringify(r.steps)).to.deep.equal([
      ['navigate', true, null],
      ['navigate', true, null],
      ['navigate_back', true, null],
      ['extract_url', true, null],
      ['navigate', true, null],
      ['extract_data', true, null],
      ['navigate', true, null],
      ['extract_data', true, null],
    ]);
    expect(r.steps[2]).to.include({ final_url: `${site.url}/list?page=1`, page_title: 'Listings page 1', attempts: 1 });
    expect(r.steps[6]).to.include({ attempts: 1, final_url: `${site.url}/rows/slowload` });
    expect(site.hits.get('/hang')).to.be.greaterThan(0);
    const rows = r.rows as Body[];
    expect(rows[0]).to.deep.include({ url: `${site.url}/list?page=1`, title: 'Listings page 1' });
    expect(rows.slice(1).map((x) => x.text)).to.deep.equal(['ready', 'parsed']);
  });

  it('navigate_back with no page before fails with no_state_change', async () => {
    const r = await run([{ intent: 'go back from nowhere', type: 'navigate_back' }]);
    expect(shape(r.steps), JSON.stringify(r.steps)).to.deep.equal([['navigate_back', false, 'no_state_change']]);
  });

  it('loop_target jumps back to the step it names; without it, to the step after its section starts', async () => {
    const before = site.hits.get('/hit') ?? 0;
    const r = await run([
      { intent: 'open the counter', type: 'navigate', url: `${site.url}/counter`, required: true },
      { intent: 'hit it', type: 'click', params: { selector: '#hit' } },
      { intent: 'three times in all', type: 'loop', loop_count: 3, loop_target: 1 },
      readAll('after-target', '#n'),
      { intent: 'start of the section', type: 'wait', seconds: 0, section: 'again' },
      { intent: 'hit it again', type: 'click', params: { selector: '#hit' }, section: 'again' },
      { intent: 'twice in all', type: 'loop', loop_count: 2, section: 'again' },
      readAll('after-section', '#n'),
    ]);
    expect(r.status, JSON.stringify(r.steps)).to.equal('succeeded');
    expect(r.steps.map((s: Body) => s.type)).to.deep.equal(['navigate', 'click', 'click', 'click', 'extract_data', 'wait', 'click', 'click', 'extract_data']);
    expect((r.rows as Body[]).map((x) => x.text)).to.deep.equal(['3', '5']);
    expect((site.hits.get('/hit') ?? 0) - before).to.equal(5);
  });

  it('expect_url_excludes demotes a click that lands on an excluded URL to wrong_target; a missing selector is selector_miss', async () => {
    const r = await run([
      { intent: 'open the way to item 7', type: 'navigate', url: `${site.url}/go?to=/item/7` },
      { intent: 'follow it, not to item 8', type: 'click', params: { selector: '#go' }, hints: { expect_url_excludes: ['/item/8', '/list'] } },
      { intent: 'open the way to item 7 again', type: 'navigate', url: `${site.url}/go?to=/item/7` },
      { intent: 'follow it, not to item 7', type: 'click', params: { selector: '#go' }, hints: { expect_url_excludes: '/item/7' } },
      { intent: 'click what is not there', type: 'click', params: { selector: '#nowhere' } },
    ]);
    expect(shape(r.steps), JSON.stringify(r.steps)).to.deep.equal([
      ['navigate', true, null],
      ['click', true, null],
      ['navigate', true, null],
      ['click', false, 'wrong_target'],
      ['click', false, 'selector_miss'],
    ]);
    expect(r.steps[1].final_url).to.equal(`${site.url}/item/7`);
    expect(r.steps[3]).to.include({ final_url: `${site.url}/item/7`, attempts: 1 });
    expect(r.steps[4]).to.include({ attempts: 2 });
    expect(r.steps[4].data).to.match(/#nowhere/);
  });

  it('on_no_navigation: skip passes, retry fails no_state_change after a retry, halt stops the run', async () => {
    const r = await run([
      { intent: 'open the blank popup page', type: 'navigate', url: `${site.url}/rows/blankpop`, required: true },
      { intent: 'capture, skipping a tab that goes nowhere', type: 'capture_link_in_new_tab', source_selector: '#blank' },
      { intent: 'capture, retrying a tab that goes nowhere', type: 'capture_link_in_new_tab', source_selector: '#blank', on_no_navigation: 'retry' },
      { intent: 'capture, halting on a tab that goes nowhere', type: 'capture_link_in_new_tab', source_selector: '#blank', on_no_navigation: 'halt' },
      { intent: 'never reached', type: 'extract_url' },
    ]);
    expect(shape(r.steps), JSON.stringify(r.steps)).to.deep.equal([
      ['navigate', true, null],
      ['capture_link_in_new_tab', true, null],
      ['capture_link_in_new_tab', false, 'no_state_change'],
      ['capture_link_in_new_tab', false, 'no_state_change'],
    ]);
    expect(r.steps[1].data).to.match(/did not navigate; skipped/);
    expect(r.steps[2].attempts).to.equal(2);
    expect(r.steps[3].attempts).to.equal(1);
    expect(r.status).to.equal('failed');
    expect(r.life.halt_class).to.equal('navigation_drift');
    // the source tab is the one left active
    expect(r.steps[3].final_url).to.equal(`${site.url}/rows/blankpop`);
    expect(r.rows).to.deep.equal([]);
  });

  it('a JavaScript dialog a click opens is dismissed (as Playwright does), named in the step, and the run goes on; runtime.dialogs accept accepts them', async () => {
    const steps = [
      { intent: 'open the dialogs page', type: 'navigate', url: `${site.url}/rows/dialogs`, required: true },
      { intent: 'press alert', type: 'click', params: { selector: '#alert' } },
      { intent: 'press confirm', type: 'click', params: { selector: '#confirm' } },
      { intent: 'press prompt', type: 'click', params: { selector: '#prompt' } },
      readAll('said', '#said li'),
    ];
    const accepted = await run({ steps, runtime: { dialogs: 'accept' } });
    expect(accepted.rows.map((x: Body) => x.text), JSON.stringify(accepted.steps)).to.deep.equal(['alert closed', 'confirm true', 'prompt Ann']);
    expect(accepted.steps[2].data).to.match(/confirm dialog "Delete the draft\?" accepted/);
    const r = await run(steps);
    expect(shape(r.steps), JSON.stringify(r.steps)).to.deep.equal([
      ['navigate', true, null],
      ['click', true, null],
      ['click', true, null],
      ['click', true, null],
      ['extract_data', true, null],
    ]);
    expect(r.rows.map((x: Body) => x.text)).to.deep.equal(['alert closed', 'confirm false', 'prompt null']);
    expect(r.steps[1].data).to.match(/alert dialog "Saved!".*dismissed/);
    expect(r.steps[2].data).to.match(/confirm dialog "Delete the draft\?".*dismissed/);
    expect(r.steps[3].data).to.match(/prompt dialog "Your name\?".*dismissed/);
  });
});
