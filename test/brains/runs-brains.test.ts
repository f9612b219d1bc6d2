import { expect } from 'chai';
import { mkdir, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { RUNNER_ENV, startGateway, newToken, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';
import { deadUrl, startFakeModel, type FakeModel } from '../support/fake-model.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('brain steps in real runs on dom_plane (fake model server, real agent, real Chromium)', function () {
  this.timeout(120_000);
  const token = newToken();
  let site: Site;
  let fake: FakeModel;
  let gw: TestGateway;

  before(async () => {
    [site, fake] = await Promise.all([startSite(), startFakeModel()]);
    const dead = await deadUrl();
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-brains-'));
    const file = path.join(dir, 'brains.json');
    await mkdir(path.join(dir, 'secrets'));
    await writeFile(path.join(dir, 'secrets', 'model_provider_api_key'), 'sk-brainy');
    await writeFile(
      file,
      JSON.stringify({
        brains: {
          'default-cua': { protocol: 'openai-chat', base_url: fake.url, model: 'fake-default', price_per_mtok_in: 1, price_per_mtok_out: 2 },
          'compact-cua': { protocol: 'compact-cua', base_url: fake.url, model: 'fake-compact' },
          'mid-cua-8b': { protocol: 'openai-chat', base_url: dead, model: 'nobody', max_retries: 2, backoff_ms: 20 },
          'large-cua-72b': { protocol: 'openai-chat', base_url: fake.url, model: 'pricey', price_per_mtok_in: 30 },
          'hosted-api': { protocol: 'hosted-api', base_url: fake.url, model: 'fake-hosted' },
        },
      }),
    );
    gw = await startGateway({ dir, env: { ...RUNNER_ENV, SERVICE_BRAINS_PATH: file }, keys: { [token]: { tenant_id: 'brainy', rate_limit_per_minute: 0, default_compute_backend: 'dom_plane' } } });
  });
  after(async () => {
    await gw.close();
    await Promise.all([site.close(), fake.close()]);
  });

  async function run(plan: unknown, extra: Body = {}): Promise<Body> {
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: false, ...extra } });
    expect(r.status, r.text).to.equal(200);
    const life = await gw.req('GET', `/v1/runs/${r.body.run_id}`, { token });
    return { ...r.body, life: life.body };
  }

  it('default-cua and the generic handler complete a task; loops, give-ups and malformed answers are classified failures', async () => {
    fake.requests.length = 0;
    const r = await run([
      { intent: 'open the counter', type: 'navigate', url: `${site.url}/counter`, required: true },
      { intent: 'press the hit button', type: 'default-cua', max_steps: 4 },
      { intent: 'press the hit button again', type: 'frobnicate', hint: 'it is the big one' },
      { intent: 'open a page that never changes', type: 'navigate', url: `${site.url}/static` },
      { intent: 'click around, stuck', type: 'default-cua', max_steps: 8 },
      { intent: 'wander down the page', type: 'default-cua', budget: 2 },
      { intent: 'give up on this', type: 'default-cua' },
      { intent: 'garble the answer', type: 'default-cua' },
    ]);
    const steps = r.steps as Body[];
    expect(steps.map((s) => [s.type, s.success, s.failure_class ?? null]), JSON.stringify(steps)).to.deep.equal([
      ['navigate', true, null],
      ['default-cua', true, null],
      ['frobnicate', true, null],
      ['navigate', true, null],
      ['default-cua', false, 'brain_loop_exhausted'],
      ['default-cua', false, 'brain_loop_exhausted'],
      ['default-cua', false, 'brain_loop_exhausted'],
      ['default-cua', false, 'unknown'],
    ]);
    // the clicks landed: the page's button called /hit once per task
    expect(site.hits.get('/hit')).to.equal(2);
    // each brain turn is in the run's trace, filed under its step (the bundle is
    // written after the run's result: the trace route answers once it is)
    expect((await gw.req('GET', `/v1/runs/${r.run_id}/trace`, { token })).status).to.equal(200);
    const trace = path.join(gw.dir, 'runs', 'brainy', String(r.run_id), 'trace');
    const modelio = await readdir(path.join(trace, 'modelio'));
    expect(modelio).to.include('0001-planner-0.json');
    const io = JSON.parse(await readFile(path.join(trace, 'modelio', '0001-planner-0.json'), 'utf8'));
    expect(io.request.model).to.equal('default-cua');
    expect(io.request.task).to.match(/press the hit button/);
    expect(steps[1]!.last_action).to.deep.include({ type: 'DONE' });
    expect(steps[4]!.data).to.match(/loop detected: CLICK repeated 3 times/);
    expect(steps[5]!.data).to.equal('no DONE within 2 actions');
    expect(steps[7]!.data).to.match(/malformed model answer: unknown action "TELEPORT"/);
    expect(steps[7]!.attempts, 'a malformed answer is retried once').to.equal(2);
    // the fake saw the screenshot at the viewport, the task with the hint, and the actions so far
    const hit = fake.requests.filter((q) => q.seen.task === 'press the hit button');
    expect(hit.map((q) => q.seen.actions)).to.deep.equal([0, 1]);
    expect(hit[0]!.seen.image).to.deep.equal({ width: 1280, height: 720 });
    expect(fake.requests.some((q) => q.seen.text.includes('Hint: it is the big one'))).to.equal(true);
    expect(fake.requests.every((q) => q.body.model === 'fake-default')).to.equal(true);
    // every turn was priced into the run: 1000 in at 1 USD/Mtok + 50 out at 2 USD/Mtok
    const perTurn = (1000 * 1 + 50 * 2) / 1e6;
    expect(r.summary).to.include(`cost ${(fake.requests.length * perTurn).toFixed(4)} USD`);
  });

  it('compact-cua clicks at coordinates scaled back from its 1428x896 input (cua_model per request)', async () => {
    fake.requests.length = 0;
    const before = site.hits.get('/hit') ?? 0;
    const r = await run(
      [
        { intent: 'open the counter', type: 'navigate', url: `${site.url}/counter`, required: true },
        { intent: 'press the hit button', type: 'default-cua', max_steps: 3, required: true },
      ],
      { cua_model: 'compact-cua' },
    );
    expect(r.status, JSON.stringify(r.steps)).to.equal('succeeded');
    expect(site.hits.get('/hit')).to.equal(before + 1);
    expect(fake.requests[0]!.seen.image).to.deep.equal({ width: 1428, height: 896 });
    expect(fake.requests[0]!.body.model).to.equal('fake-compact');
  });

  it('computer_plane: the brain acts through xdotool (a click at the pointer\'s resting place included)', async () => {
    fake.requests.length = 0;
    const before = site.hits.get('/hit') ?? 0;
    const r = await run(
      [
        { intent: 'open the counter', type: 'navigate', url: `${site.url}/counter`, required: true },
        // no selector, no DOM: the brain grounds the click on the screenshot; the counter's new
        // number is what the runner's state-change check sees (attempts 1: no second click)
        { intent: 'press the hit button', type: 'click' },
        { intent: 'press the hit button', type: 'default-cua', max_steps: 3, required: true },
        // Xvfb starts with the pointer in the middle of the screen: a click there must not hang;
        // the screen settles after the first clicks (focus, hover), then the same click repeats on it
        { intent: 'click, stuck', type: 'default-cua', max_steps: 8 },
      ],
      { compute_backend: 'computer_plane' },
    );
    const steps = r.steps as Body[];
    expect(steps.map((s) => [s.type, s.success, s.failure_class ?? null]), JSON.stringify(steps)).to.deep.equal([
      ['navigate', true, null],
      ['click', true, null],
      ['default-cua', true, null],
      ['default-cua', false, 'brain_loop_exhausted'],
    ]);
    expect(steps[1]).to.include({ attempts: 1 });
    expect(steps[1]!.last_action.reasoning).to.equal('click via grounding by default-cua');
    expect(site.hits.get('/hit')).to.equal(before + 2);
    expect(steps[3]!.data).to.match(/loop detected/);
  });

  it('halts with model_provider_unreachable when the upstream is down, after backoff', async () => {
    const r = await run([{ intent: 'press the hit button', type: 'default-cua' }], { cua_model: 'mid-cua-8b' });
    expect(r.life).to.include({ status: 'failed', halt_class: 'model_provider_unreachable' });
    expect(r.summary).to.match(/unreachable \(ECONNREFUSED\); gave up after 3 attempts/);
    expect(r.life.failure_help.halt_class).to.equal('model_provider_unreachable');
  });

  it('extracts rows with the model (an invalid first answer repaired on retry) and halts on a gate the hosted model judges false', async () => {
    fake.requests.length = 0;
    let extractions = 0;
    fake.script = (seen) => {
      if (seen.text.includes('"rows"')) {
        extractions++;
        // first answer: a title that is not a string; the repair prompt carries the validation error
        if (extractions === 1) return { text: '{"rows": [{"title": 1, "price": 100.5}]}' };
        return { text: '```json\n{"rows": [{"title": "Flat 1", "price": 100.5}, {"title": "Flat 2", "price": 200.5}, {"title": "<UNKNOWN>", "price": null}]}\n```' };
      }
      if (seen.text.includes('Does this hold')) return { text: seen.text.includes('Flat 99') ? '{"holds": false, "reason": "only flats 1 to 3"}' : '{"holds": true, "reason": "listed"}' };
      return { text: 'no' };
    };
    try {
      const r = await run([
        { intent: 'open the listings', type: 'navigate', url: `${site.url}/list?page=1`, required: true },
        { intent: 'read the flats', type: 'extract_data', extract: { schema_name: 'flats', max_items: 5, fields: [{ name: 'title', type: 'str', required: true }, { name: 'price', type: 'float' }] } },
        { intent: 'read the flats with the hosted model', type: 'hosted-api', extract: { schema_name: 'hosted', max_items: 5, fields: [{ name: 'title', type: 'str', required: true }, { name: 'price', type: 'float' }] } },
        { intent: 'check the first flat', type: 'wait', seconds: 0, gate: true, verify: 'the page lists Flat 1', section: 'check' },
        { intent: 'check a flat that is not there', type: 'wait', seconds: 0, gate: true, verify: 'the page lists Flat 99', section: 'check' },
        { intent: 'never reached', type: 'done' },
      ]);
      const steps = r.steps as Body[];
      expect(steps[1], JSON.stringify(steps[1])).to.include({ success: true, rows: 3 });
      expect(steps[1]!.data).to.match(/3 row\(s\) read by default-cua after one repair/);
      const repair = fake.requests.filter((q) => q.seen.text.includes('"rows"'))[1]!;
      expect(repair.seen.text).to.match(/Your previous answer was invalid: answer\/rows\/0\/title must be string/);
      const rows = (await gw.req('GET', `/v1/runs/${r.run_id}/artifacts/extracted_rows.json`, { token })).body;
      expect(rows.slice(0, 2)).to.deep.equal([
        { title: 'Flat 1', price: 100.5 },
        { title: 'Flat 2', price: 200.5 },
      ]);
      // the hosted-api step read the same three rows with the hosted model and the tenant's key
      expect(steps[2], JSON.stringify(steps[2])).to.include({ type: 'hosted-api', success: true, rows: 3 });
      expect(steps[2]!.data).to.match(/read by hosted-api$/);
      expect(fake.requests.filter((q) => q.seen.text.includes('"rows"')).map((q) => q.body.model)).to.deep.equal(['fake-default', 'fake-default', 'fake-hosted']);
      expect(r.extraction_quality.unknown_placeholder_row_count).to.equal(2);
      expect(steps[3]).to.include({ success: true });
      expect(r.life).to.include({ status: 'failed', halt_class: 'gate_failed' });
      expect(r.error).to.equal('gate_failed');
      expect(r.summary).to.match(/verify does not hold \(hosted-api\)/);
      // gates are judged by the hosted model with the tenant's key
      const judged = fake.requests.filter((q) => q.seen.text.includes('Does this hold'));
      expect(judged.map((q) => [q.body.model, q.headers.authorization])).to.deep.equal([
        ['fake-hosted', 'Bearer sk-brainy'],
        ['fake-hosted', 'Bearer sk-brainy'],
      ]);
    } finally {
      fake.script = undefined;
    }
  });

  it("judges a non-gate step's verify with the hosted model (preferred over the run's brain), with the tenant's key", async () => {
    fake.requests.length = 0;
    const r = await run([
      { intent: 'open the listings', type: 'navigate', url: `${site.url}/list?page=2`, verify: 'the page lists Flat 4' },
      { intent: 'read where we are', type: 'extract_url', verify: 'the page lists Flat 5' },
    ]);
    expect(r.status, JSON.stringify(r.steps)).to.equal('succeeded');
    const judged = fake.requests.filter((q) => q.seen.text.includes('Does this hold'));
    expect(judged.map((q) => [q.body.model, q.headers.authorization, /Flat \d+/.exec(q.seen.text)?.[0]])).to.deep.equal([
      ['fake-hosted', 'Bearer sk-brainy', 'Flat 4'],
      ['fake-hosted', 'Bearer sk-brainy', 'Flat 5'],
    ]);
  });

  it('halts bad_url when the brain asks to open a URL that is not http(s), and never sends it to the browser', async () => {
    fake.script = (seen) => (seen.tool === 'act' ? { call: { action: 'NAVIGATE', url: 'javascript:alert(document.cookie)' } } : { text: 'no' });
    try {
      const r = await run([
        { intent: 'open the counter', type: 'navigate', url: `${site.url}/counter`, required: true },
        { intent: 'go somewhere the brain picks', type: 'default-cua', max_steps: 3 },
      ]);
      expect(r.status, JSON.stringify(r.steps.map((x: Body) => [x.type, x.success, x.data]))).to.equal('failed');
      expect(r.life.halt_class).to.equal('bad_url');
      expect(r.life.failure_help.halt_class).to.equal('bad_url');
      expect(r.error).to.equal('navigation_blocked');
      const step = (r.steps as Body[]).at(-1)!;
      expect(step.type).to.equal('default-cua');
      expect(step.data).to.match(/javascript:alert/);
      expect(step.final_url).to.equal(`${site.url}/counter`);
    } finally {
      fake.script = undefined;
    }
  });

  it('halts with budget_cap when model tokens pass max_cost', async () => {
    fake.requests.length = 0;
    // 1000 tokens at 30 USD/Mtok: 0.03 USD a turn; the cap of 0.05 goes on the second turn
    const r = await run([{ intent: 'wander down the page', type: 'default-cua', max_steps: 10 }], { cua_model: 'large-cua-72b', max_cost: 0.05 });
    expect(r.life).to.include({ status: 'failed', halt_class: 'budget_cap' });
    expect(r.error).to.equal('max_cost_exceeded');
    expect(fake.requests).to.have.length(2);
  });
});
