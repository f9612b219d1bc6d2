import { expect } from 'chai';
import { RUNNER_ENV, startGateway, newToken, type TestGateway } from '../support/gateway.ts';
import { fakeBrainsDir, startFakeModel, type FakeModel } from '../support/fake-model.ts';
import { pageOffset, shopBrain, shopPlanComputer as shopPlan, startReplaySite, type ReplaySite } from '../support/replay-site.ts';
import { validator } from '../../schemas/index.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const planSchema = validator('plan.schema.json');

describe('replays on computer_plane: coordinates with a visual anchor (real gateway, computer agent, Xvfb, xdotool, Chromium; scripted model)', function () {
  this.timeout(240_000);
  const token = newToken();
  const other = newToken();
  let site: ReplaySite;
  let fake: FakeModel;
  let gw: TestGateway;

  before(async () => {
    [site, fake] = await Promise.all([startReplaySite(), startFakeModel()]);
    const { dir, brainsPath } = await fakeBrainsDir(fake, 'replay-computer');
    const tenant = { rate_limit_per_minute: 0, default_compute_backend: 'computer_plane' };
    gw = await startGateway({ dir, env: { ...RUNNER_ENV, SERVICE_BRAINS_PATH: brainsPath }, keys: { [token]: { tenant_id: 'desk', ...tenant }, [other]: { tenant_id: 'intruder', ...tenant } } });
    // the scripted brain clicks page coordinates: find where this screen draws the page (the other tenant's run: nothing of it is kept by ours)
    fake.requests.length = 0;
    const r = await gw.req('POST', '/v1/predict', { token: other, body: { detached: false, plan: [{ intent: 'open', type: 'navigate', url: `${site.url}/calibrate` }, { intent: 'look', type: 'default-cua', max_steps: 1 }] } });
    expect(r.body.status, r.text).to.equal('succeeded');
    fake.script = shopBrain(site, await pageOffset(fake.requests[0]!.body));
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
  async function heals(runId: string): Promise<Array<[string, string, number]>> {
    const r = await gw.req('GET', `/v1/runs/${runId}/events`, { token });
    expect(r.status, r.text).to.equal(200);
    return ((r.body.events ?? r.body) as Body[]).filter((e) => e.type === 'run.replay_healed').map((e) => [e.data.how, e.data.path, e.data.model_calls]);
  }
  const items = () => site.hits.get('/item/1') ?? 0;

  it('learns points with anchors, replays with no model call, follows a moved control by its anchor, and heals a removed one with one call', async () => {
    // 1. the scripted brain solves the task on the screen
    fake.requests.length = 0;
    let seen = items();
    const first = await run({ plan: shopPlan(site), replay: { cache: true } });
    expect(first.status, JSON.stringify(first.steps)).to.equal('succeeded');
    expect(fake.requests.length).to.equal(7);
    expect(items()).to.equal(seen + 1);

    // 2. its compiled plan: coordinates, each click with its anchor, valid against the plan schema
    const c = await gw.req('GET', `/v1/runs/${first.run_id}/compiled_plan`, { token });
    expect(c.status, c.text).to.equal(200);
    expect(planSchema(c.body.plan), JSON.stringify(planSchema.errors)).to.equal(true);
    const steps = c.body.plan.steps as Body[];
    expect(steps.map((s) => s.type)).to.deep.equal(['navigate', 'click', 'type_text', 'click', 'click']);
    expect(steps[2]!.params).to.deep.equal({ text: 'widget' });
    for (const k of [1, 3, 4]) {
      expect(steps[k]!.params).to.have.keys('x', 'y');
      expect(steps[k]!.replay.anchor).to.include({ width: 48, height: 48, dx: 24, dy: 24 });
    }
    expect(steps[3]!.replay).to.include({ group: 2, from_run: first.run_id, intent: 'press the search button' });
    expect(steps[4]!.replay.landmark).to.equal('Item');
    const id = c.body.compiled_plan_id as string;
    const recorded = { x: steps[3]!.params.x as number, y: steps[3]!.params.y as number };

    // 3. the replay: no model call, the item reached, each replayed step says so
    fake.requests.length = 0;
    seen = items();
    const second = await run({ plan: shopPlan(site), replay: { cache: true } });
    expect(second.status, JSON.stringify(second.steps)).to.equal('succeeded');
    expect(fake.requests.length).to.equal(0);
    expect(items()).to.equal(seen + 1);
    expect((second.steps as Body[]).filter((s) => s.replayed).map((s) => s.type)).to.deep.equal(['click', 'type_text', 'click', 'click']);
    expect(await heals(second.run_id)).to.deep.equal([]);

    // 4. the Search button moved 36 px right and 24 down: the anchor finds it, still no model call
    site.shifted = true;
    fake.requests.length = 0;
    seen = items();
    const third = await run({ plan: shopPlan(site), replay: { cache: true } });
    expect(third.status, JSON.stringify(third.steps)).to.equal('succeeded');
    expect(fake.requests.length).to.equal(0);
    expect(items()).to.equal(seen + 1);
    expect(await heals(third.run_id)).to.deep.equal([['anchor', 'steps[3]', 0]]);
    const moved = (await gw.req('GET', `/v1/compiled_plans/${id}`, { token })).body;
    expect(moved.plan.steps[3].params).to.deep.equal({ x: recorded.x + 36, y: recorded.y + 24 });
    expect(planSchema(moved.plan)).to.equal(true);

    // 5. the next release has no Search button there (a "Find" one elsewhere): one grounding call heals that step
    site.shifted = false;
    site.changed = true;
    fake.requests.length = 0;
    seen = items();
    const fourth = await run({ replay: { compiled_plan_id: id } });
    site.changed = false;
    expect(fourth.status, JSON.stringify(fourth.steps)).to.equal('succeeded');
    expect(fake.requests.map((r) => r.seen.task)).to.have.length(1);
    expect(fake.requests[0]!.seen.task).to.match(/^Click the target of this step/);
    expect(items()).to.equal(seen + 1);
    expect(await heals(fourth.run_id)).to.deep.equal([['grounding', 'steps[3]', 1]]);
    const healed = (await gw.req('GET', `/v1/compiled_plans/${id}`, { token })).body;
    expect(healed.heals).to.equal(2);
    expect(planSchema(healed.plan)).to.equal(true);
    expect(healed.plan.steps[3].replay.anchor.png).to.not.equal(steps[3]!.replay.anchor.png);

    // 6. another tenant can neither read nor run it
    expect((await gw.req('GET', `/v1/compiled_plans/${id}`, { token: other })).status).to.equal(404);
    expect((await gw.req('POST', '/v1/predict', { token: other, body: { replay: { compiled_plan_id: id } } })).status).to.equal(404);
  });
});
