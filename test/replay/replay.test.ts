import { expect } from 'chai';
import { RUNNER_ENV, startGateway, newToken, type TestGateway } from '../support/gateway.ts';
import { fakeBrainsDir, startFakeModel, type FakeModel } from '../support/fake-model.ts';
import { shopBrain, shopPlan, startReplaySite, type ReplaySite } from '../support/replay-site.ts';
import { validator } from '../../schemas/index.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const planSchema = validator('plan.schema.json');

describe('replays: a brain run compiles into a mechanical plan that replays and heals (real gateway, agent, Chromium; scripted model)', function () {
  this.timeout(180_000);
  const token = newToken();
  const other = newToken();
  let site: ReplaySite;
  let fake: FakeModel;
  let gw: TestGateway;

  before(async () => {
    [site, fake] = await Promise.all([startReplaySite(), startFakeModel()]);
    fake.script = shopBrain(site);
    const { dir, brainsPath } = await fakeBrainsDir(fake, 'replay');
    const tenant = { rate_limit_per_minute: 0, default_compute_backend: 'dom_plane' };
    gw = await startGateway({ dir, env: { ...RUNNER_ENV, SERVICE_BRAINS_PATH: brainsPath }, keys: { [token]: { tenant_id: 'shopper', ...tenant }, [other]: { tenant_id: 'intruder', ...tenant } } });
  });
  after(async () => {
    await gw?.close();
    await Promise.all([site?.close(), fake?.close()]);
  });

  async function run(body: Body, as = token): Promise<Body> {
    const r = await gw.req('POST', '/v1/predict', { token: as, body: { detached: false, ...body } });
    expect(r.status, r.text).to.equal(200);
    return r.body;
  }
  const rowsOf = async (runId: string) => (await gw.req('GET', `/v1/runs/${runId}/result`, { token })).body.steps.at(-1).rows;
  async function events(runId: string): Promise<Body[]> {
    const r = await gw.req('GET', `/v1/runs/${runId}/events`, { token });
    expect(r.status, r.text).to.equal(200);
    return (r.body.events ?? r.body) as Body[];
  }

  it('learns, replays with no model call, heals a changed control with one call, and keeps the plan to its tenant', async () => {
    // 1. the scripted brain solves the task: three brain steps, then the mechanical read
    fake.requests.length = 0;
    const first = await run({ plan: shopPlan(site), replay: { cache: true } });
    expect(first.status, JSON.stringify(first)).to.equal('succeeded');
    const learnCalls = fake.requests.length;
    expect(learnCalls).to.equal(7);
    expect(first.steps.at(-1).rows).to.equal(3);

    // 2. its compiled plan: valid against the plan schema, the brain steps now mechanical
    const c = await gw.req('GET', `/v1/runs/${first.run_id}/compiled_plan`, { token });
    expect(c.status, c.text).to.equal(200);
    expect(planSchema(c.body.plan), JSON.stringify(planSchema.errors)).to.equal(true);
    const steps = c.body.plan.steps as Body[];
    expect(steps.map((s) => s.type)).to.deep.equal(['navigate', 'type_text', 'click', 'click', 'extract_data']);
    expect(steps[1]!.params).to.include({ label: 'Search terms', text: 'widget' });
    expect(steps[2]!.params).to.include({ label: 'Search', role: 'button' });
    expect(steps[2]!.replay).to.include({ group: 2, from_run: first.run_id, intent: 'press the search button', brain_type: 'default-cua' });
    expect(steps[3]!.replay.landmark).to.equal('Blue widget');
    expect(c.body.compiled_steps).to.equal(3);
    const id = c.body.compiled_plan_id as string;
    expect((await gw.req('GET', '/v1/compiled_plans', { token })).body.compiled_plans.map((p: Body) => p.compiled_plan_id)).to.deep.equal([id]);

    // 3. the same submission again replays it: no model call, same rows, each replayed step says so
    fake.requests.length = 0;
    const second = await run({ plan: shopPlan(site), replay: { cache: true } });
    expect(second.status, JSON.stringify(second.steps)).to.equal('succeeded');
    expect(fake.requests.length).to.equal(0);
    expect(await rowsOf(second.run_id)).to.equal(3);
    const replayed = (second.steps as Body[]).filter((s) => s.replayed);
    expect(replayed.map((s) => s.type)).to.deep.equal(['type_text', 'click', 'click']);
    expect(replayed.every((s) => s.replayed_from === first.run_id)).to.equal(true);
    expect((second.steps as Body[])[0]!.replayed).to.equal(undefined);

    // 4. the site's next release renames and moves the Search button: one grounding call heals that step
    site.changed = true;
    fake.requests.length = 0;
    const third = await run({ replay: { compiled_plan_id: id } });
    expect(third.status, JSON.stringify(third.steps)).to.equal('succeeded');
    expect(fake.requests.length, JSON.stringify([fake.requests.map((r) => r.seen.task), third.steps.map((s: Body) => s.data)])).to.equal(1);
    expect(fake.requests[0]!.seen.task).to.match(/^Click the target of this step/);
    expect(await rowsOf(third.run_id)).to.equal(3);
    const healedEvents = (await events(third.run_id)).filter((e) => e.type === 'run.replay_healed');
    expect(healedEvents.length).to.equal(1);
    expect(healedEvents[0]!.data).to.include({ how: 'grounding', model_calls: 1, compiled_plan_id: id, replayed_from: first.run_id, path: 'steps[2]' });
    const healed = await gw.req('GET', `/v1/compiled_plans/${id}`, { token });
    expect(healed.body.heals).to.equal(1);
    expect(healed.body.last_healed_by).to.equal(third.run_id);
    expect(healed.body.plan.steps[2].params).to.include({ label: 'Find' });
    expect(planSchema(healed.body.plan)).to.equal(true);

    // the healed plan replays the changed site with no model call
    fake.requests.length = 0;
    const fourth = await run({ plan: shopPlan(site), replay: { cache: true } });
    expect(fourth.status, JSON.stringify(fourth.steps)).to.equal('succeeded');
    expect(fake.requests.length).to.equal(0);

    // 5. another tenant can neither read nor run it
    expect((await gw.req('GET', `/v1/compiled_plans/${id}`, { token: other })).status).to.equal(404);
    expect((await gw.req('GET', `/v1/runs/${first.run_id}/compiled_plan`, { token: other })).status).to.equal(404);
    expect((await gw.req('GET', '/v1/compiled_plans', { token: other })).body.compiled_plans).to.deep.equal([]);
    const refused = await gw.req('POST', '/v1/predict', { token: other, body: { replay: { compiled_plan_id: id } } });
    expect(refused.status, refused.text).to.equal(404);
    expect((await gw.req('DELETE', `/v1/compiled_plans/${id}`, { token: other })).status).to.equal(404);
  });

  it('a page that moved falls back to the brain for the steps it changed, and the healed plan replays with no call', async () => {
    site.changed = false;
    site.moved = false;
    // a fresh start: the plan the first test healed would be replayed otherwise
    for (const p of (await gw.req('GET', '/v1/compiled_plans', { token })).body.compiled_plans as Body[]) await gw.req('DELETE', `/v1/compiled_plans/${p.compiled_plan_id}`, { token });
    fake.requests.length = 0;
    const first = await run({ plan: shopPlan(site), replay: { cache: true } });
    expect(first.status, JSON.stringify(first)).to.equal('succeeded');
    expect(fake.requests.length).to.equal(7);
    site.moved = true;
    fake.requests.length = 0;
    const healed = await run({ plan: shopPlan(site), replay: { cache: true } });
    expect(healed.status, JSON.stringify(healed.steps)).to.equal('succeeded');
    // the two steps recorded on / (type, then press Search) are done by the brain again: 3 + 2 calls, the third step replays
    expect(fake.requests.map((r) => r.seen.task)).to.deep.equal(['type widget into the search box', 'type widget into the search box', 'type widget into the search box', 'press the search button', 'press the search button']);
    expect(await rowsOf(healed.run_id)).to.equal(3);
    const heals = (await events(healed.run_id)).filter((e) => e.type === 'run.replay_healed').map((e) => [e.data.how, e.data.path, e.data.model_calls]);
    expect(heals).to.deep.equal([['brain', 'steps[1]', 3], ['brain', 'steps[2]', 2]]);
    const plan = (await gw.req('GET', `/v1/runs/${healed.run_id}/compiled_plan`, { token })).body;
    expect(plan.heals).to.equal(2);
    expect(planSchema(plan.plan)).to.equal(true);
    expect(plan.plan.steps.map((s: Body) => s.type)).to.deep.equal(['navigate', 'type_text', 'click', 'click', 'extract_data']);
    expect(plan.plan.steps[1].replay.url_before).to.equal(`${site.url}/shop`);
    fake.requests.length = 0;
    const again = await run({ plan: shopPlan(site), replay: { cache: true } });
    expect(again.status, JSON.stringify(again.steps)).to.equal('succeeded');
    expect(fake.requests.length).to.equal(0);
    site.moved = false;
  });

  it("carries a brain step's verify: not judged on a mechanical replay, judged again when the brain heals the step", async () => {
    site.changed = false;
    site.moved = false;
    for (const p of (await gw.req('GET', '/v1/compiled_plans', { token })).body.compiled_plans as Body[]) await gw.req('DELETE', `/v1/compiled_plans/${p.compiled_plan_id}`, { token });
    const plan = shopPlan(site) as { steps: Body[] };
    plan.steps[2] = { ...plan.steps[2], verify: 'the results list shows' };
    const verifies = () => fake.requests.filter((r) => r.seen.tool === 'none').length;
    fake.requests.length = 0;
    const first = await run({ plan, replay: { cache: true } });
    expect(first.status, JSON.stringify(first.steps)).to.equal('succeeded');
    expect([fake.requests.length, verifies()]).to.deep.equal([8, 1]);
    const compiled = (await gw.req('GET', `/v1/runs/${first.run_id}/compiled_plan`, { token })).body;
    expect(compiled.plan.steps[2].replay.verify).to.equal('the results list shows');
    expect(compiled.plan.steps[1].replay.verify).to.equal(undefined);
    expect(planSchema(compiled.plan)).to.equal(true);
    // a mechanical replay: the landmark and URLs stand in, no call
    fake.requests.length = 0;
    const again = await run({ plan, replay: { cache: true } });
    expect(again.status, JSON.stringify(again.steps)).to.equal('succeeded');
    expect(fake.requests.length).to.equal(0);
    // the shop moved: the brain redoes both steps recorded on /, and the verified one is judged again
    site.moved = true;
    fake.requests.length = 0;
    const healed = await run({ plan, replay: { cache: true } });
    site.moved = false;
    expect(healed.status, JSON.stringify(healed.steps)).to.equal('succeeded');
    expect([fake.requests.length, verifies()]).to.deep.equal([6, 1]);
    const heals = (await events(healed.run_id)).filter((e) => e.type === 'run.replay_healed').map((e) => [e.data.how, e.data.path, e.data.model_calls]);
    expect(heals).to.deep.equal([['brain', 'steps[1]', 3], ['brain', 'steps[2]', 3]]);
    const after = (await gw.req('GET', `/v1/runs/${healed.run_id}/compiled_plan`, { token })).body;
    expect(after.plan.steps[2].replay.verify).to.equal('the results list shows');
  });

  it('a control renamed in place is found again by its recorded id, with no model call', async () => {
    for (const p of (await gw.req('GET', '/v1/compiled_plans', { token })).body.compiled_plans as Body[]) await gw.req('DELETE', `/v1/compiled_plans/${p.compiled_plan_id}`, { token });
    const first = await run({ plan: shopPlan(site), replay: { cache: true } });
    expect(first.status, JSON.stringify(first)).to.equal('succeeded');
    site.renamed = true;
    fake.requests.length = 0;
    const replay = await run({ plan: shopPlan(site), replay: { cache: true } });
    site.renamed = false;
    expect(replay.status, JSON.stringify(replay.steps)).to.equal('succeeded');
    expect(fake.requests.length).to.equal(0);
    const heals = (await events(replay.run_id)).filter((e) => e.type === 'run.replay_healed').map((e) => [e.data.how, e.data.path, e.data.model_calls]);
    expect(heals).to.deep.equal([['selector', 'steps[2]', 0]]);
    const plan = (await gw.req('GET', `/v1/runs/${replay.run_id}/compiled_plan`, { token })).body;
    expect(plan.plan.steps[2].params.selector).to.equal('#go');
    expect(planSchema(plan.plan)).to.equal(true);
  });

  it('never records text typed into a password field: that step is not compiled', async () => {
    const r = await run({ plan: [{ intent: 'open the sign-in page', type: 'navigate', url: `${site.url}/login` }, { intent: 'type the password', type: 'default-cua', max_steps: 4 }] });
    expect(r.status, JSON.stringify(r)).to.equal('succeeded');
    expect((await gw.req('GET', `/v1/runs/${r.run_id}/compiled_plan`, { token })).status).to.equal(404);
    const compiled = (await events(r.run_id)).find((e) => e.type === 'run.plan_compiled');
    expect(compiled?.data.compiled_steps).to.equal(0);
    expect(JSON.stringify(compiled)).to.match(/password field/).and.not.match(/hunter2/);
    expect(JSON.stringify((await gw.req('GET', '/v1/compiled_plans', { token })).body)).to.not.match(/hunter2/);
  });

  it('refuses bad replay options with {detail}, and deletes a plan', async () => {
    const bad = [
      { replay: { compiled_plan_id: '../etc' } },
      { replay: { cache: false }, plan: shopPlan(site) },
      { replay: {}, plan: shopPlan(site) },
      { replay: { compiled_plan_id: `cp_${'0'.repeat(32)}`, cache: true } },
    ];
    for (const body of bad) {
      const r = await gw.req('POST', '/v1/predict', { token, body });
      expect(r.status, r.text).to.equal(400);
      expect(r.body.detail).to.be.a('string');
    }
    const missing = await gw.req('POST', '/v1/predict', { token, body: { replay: { compiled_plan_id: `cp_${'0'.repeat(32)}` } } });
    expect(missing.status, missing.text).to.equal(404);
    const both = await gw.req('POST', '/v1/predict', { token, body: { replay: { compiled_plan_id: `cp_${'0'.repeat(32)}` }, plan: shopPlan(site) } });
    expect(both.status, both.text).to.equal(400);
    expect((await gw.req('GET', '/v1/compiled_plans/nope', { token })).status).to.equal(404);
    const list = (await gw.req('GET', '/v1/compiled_plans', { token })).body.compiled_plans as Body[];
    for (const p of list) {
      const d = await gw.req('DELETE', `/v1/compiled_plans/${p.compiled_plan_id}`, { token });
      expect(d.body).to.deep.equal({ compiled_plan_id: p.compiled_plan_id, deleted: true });
      expect((await gw.req('GET', `/v1/compiled_plans/${p.compiled_plan_id}`, { token })).status).to.equal(404);
    }
  });
});
