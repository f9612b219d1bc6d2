// A brain step's `reverse` (issue 16): a brain step that failed after acting is
// undone by the brain carrying out `reverse` before its retry; a reverse that
// fails stops the retries. Fake model server (scripted), real gateway, agent
// and Chromium on dom_plane.
import { expect } from 'chai';
import { RUNNER_ENV, newToken, startGateway, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';
import { startFakeModel, type FakeModel, fakeBrainsDir } from '../support/fake-model.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe("a brain step's reverse before its retry (fake model, real gateway and Chromium)", function () {
  this.timeout(180_000);
  const token = newToken();
  let site: Site;
  let fake: FakeModel;
  let gw: TestGateway;
  /** what the reverse answers: done or give up */
  let undoSucceeds = true;
  let undone = false;

  before(async () => {
    [site, fake] = await Promise.all([startSite(), startFakeModel()]);
    // "order": click, then an answer the brain cannot read (a failure after acting) until undone; "undo": done or give up
    fake.script = (seen) => {
      const t = seen.task.toLowerCase();
      if (t.includes('undo')) {
        undone = undoSucceeds;
        return { call: { action: 'DONE', success: undoSucceeds, reasoning: undoSucceeds ? 'undone' : 'cannot undo' } };
      }
      if (t.includes('order') && undone) return { call: { action: 'DONE', success: true, reasoning: 'ordered' } };
      if (t.includes('order') && seen.actions === 0) return { call: { action: 'CLICK', x: 200, y: 150, reasoning: 'the order button' } };
      return { call: { action: 'TELEPORT' } };
    };
    const { dir, brainsPath: file } = await fakeBrainsDir(fake, 'reverse');
    gw = await startGateway({ dir, env: { ...RUNNER_ENV, SERVICE_BRAINS_PATH: file }, keys: { [token]: { tenant_id: 'rev', rate_limit_per_minute: 0, default_compute_backend: 'dom_plane' } } });
  });
  after(async () => {
    await gw.close();
    await Promise.all([site.close(), fake.close()]);
  });

  async function run(): Promise<{ step: Body; tasks: string[]; log: string[] }> {
    fake.requests.length = 0;
    undone = false;
    const plan = [
      { intent: 'open the counter', type: 'navigate', url: `${site.url}/counter` },
      { intent: 'place the order', type: 'default-cua', max_steps: 4, reverse: 'undo the order: reset the counter' },
    ];
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: false } });
    expect(r.status, r.text).to.equal(200);
    const logs = (await gw.req('POST', '/v1/predict', { token, body: { action: 'logs', run_id: r.body.run_id } })).body;
    return { step: r.body.steps[1], tasks: fake.requests.map((q) => q.seen.task), log: logs.events as string[] };
  }

  it('undoes a failed attempt that had acted, then retries it', async () => {
    undoSucceeds = true;
    const { step, tasks, log } = await run();
    expect(step, JSON.stringify(step).slice(0, 400)).to.include({ success: true, attempts: 2 });
    const first = tasks.findIndex((t) => t.includes('undo the order'));
    expect(first, 'the brain was asked to undo').to.be.above(0);
    expect(tasks.slice(0, first).every((t) => t.includes('place the order')), 'after the failed attempt').to.equal(true);
    expect(tasks.slice(first + 1).some((t) => t.includes('place the order')), 'and before the retry').to.equal(true);
    expect(log.some((l) => /steps\[1\] reverse done/.test(l))).to.equal(true);
  });

  it('does not retry when the reverse fails (a retry could do the action twice)', async () => {
    undoSucceeds = false;
    const { step, tasks } = await run();
    expect(step).to.include({ success: false, attempts: 1 });
    expect(step.data).to.match(/reverse failed, not retried/);
    expect(tasks.filter((t) => t.includes('place the order')).length, 'the order was not tried again').to.equal(2);
  });
});
