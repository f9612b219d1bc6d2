// Budgets as step failures (issue 12): the per-URL context budget (model calls a
// run may spend on one URL, SERVICE_URL_CONTEXT_BUDGET) and the per-step time
// budget (SERVICE_STEP_TIMEOUT_SECONDS) fail the step that trips them with
// budget_exceeded, on both planes. Fake model server, real agents, real Chromium.
import { expect } from 'chai';
import { RUNNER_ENV, startGateway, newToken, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';
import { startFakeModel, type FakeModel, fakeBrainsDir } from '../support/fake-model.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('budgets fail the step that trips them (fake model, real agents and Chromium)', function () {
  this.timeout(180_000);
  const token = newToken();
  let site: Site;
  let fake: FakeModel;
  let gw: TestGateway;
  /** the same, with a 3 s step time budget */
  let quick: TestGateway;

  before(async () => {
    [site, fake] = await Promise.all([startSite(), startFakeModel()]);
    const { dir, brainsPath: file } = await fakeBrainsDir(fake, 'budget');
    gw = await startGateway({
      dir,
      env: { ...RUNNER_ENV, SERVICE_BRAINS_PATH: file, SERVICE_URL_CONTEXT_BUDGET: '5' },
      keys: { [token]: { tenant_id: 'budget', rate_limit_per_minute: 0 } },
    });
    quick = await startGateway({ env: { ...RUNNER_ENV, SERVICE_STEP_TIMEOUT_SECONDS: '15' }, keys: { [token]: { tenant_id: 'budget', rate_limit_per_minute: 0 } } });
  });
  after(async () => {
    await Promise.all([gw.close(), quick.close()]);
    await Promise.all([site.close(), fake.close()]);
  });

  const run = async (plan: unknown, backend: string, on: TestGateway = gw): Promise<Body> => {
    const r = await on.req('POST', '/v1/predict', { token, body: { plan, compute_backend: backend, detached: false } });
    expect(r.status, r.text).to.equal(200);
    return r.body as Body;
  };

  for (const backend of ['dom_plane', 'computer_plane']) {
    it(`fails the brain step past the per-URL context budget with budget_exceeded, and another URL has its own (${backend})`, async () => {
      fake.requests.length = 0;
      const hit = { intent: 'press the hit button', type: 'default-cua', max_steps: 4 };
      const r = await run(
        [
          { intent: 'open the counter', type: 'navigate', url: `${site.url}/counter` },
          hit, // model calls 1-2 on /counter (a click, then done)
          hit, // 3-4
          hit, // 5, then the 6th is refused: past the budget of 5
          { intent: 'open the listings', type: 'navigate', url: `${site.url}/list?page=1` },
          hit, // calls 1-2 on /list
        ],
        backend,
      );
      const steps = r.steps as Body[];
      expect(steps.map((s) => [s.type, s.success, s.failure_class ?? null]), JSON.stringify(steps)).to.deep.equal([
        ['navigate', true, null],
        ['default-cua', true, null],
        ['default-cua', true, null],
        ['default-cua', false, 'budget_exceeded'],
        ['navigate', true, null],
        ['default-cua', true, null],
      ]);
      expect(steps[3]!.data).to.match(/per-URL context budget is spent: 5 model calls on http:\/\/127\.0\.0\.1:\d+\/counter/);
      expect(steps[3]!.attempts, 'a spent budget is not retried').to.equal(1);
      expect(steps[3]!.last_action).to.deep.include({ type: 'CLICK' });
      // the model was not called past the budget: 5 on the counter, 2 on the listings
      expect(fake.requests.length).to.equal(7);
    });

    it(`fails a step past its time budget with budget_exceeded and halts halt_timeout (${backend})`, async () => {
      const r = await run(
        [
          { intent: 'open the counter', type: 'navigate', url: `${site.url}/counter` },
          { intent: 'wait longer than a step may', type: 'wait', seconds: 40 },
        ],
        backend,
        quick,
      );
      expect(r.status).to.equal('failed');
      const life = (await quick.req('GET', `/v1/runs/${r.run_id}`, { token })).body as Body;
      expect(life.halt_class).to.equal('halt_timeout');
      const steps = r.steps as Body[];
      // (15 s: a first navigate on computer_plane took longer than 3 s, then 8 s, on a loaded CI host)
      expect(steps.map((s) => [s.type, s.success, s.failure_class ?? null]), JSON.stringify(steps.map((s) => s.data))).to.deep.equal([
        ['navigate', true, null],
        ['wait', false, 'budget_exceeded'],
      ]);
      expect(steps[1]!.data).to.match(/halted \(halt_timeout\): step steps\[1\] \(wait\) took longer than 15000 ms/);
    });
  }
});
