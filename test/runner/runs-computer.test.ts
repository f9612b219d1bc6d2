import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { startGateway, newToken, sleep, type TestGateway, until } from '../support/gateway.ts';
import { checkPlaneFit } from '../../gateway/runs/plan-policy.ts';
import { startSite, type Site } from '../support/site.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Pids of plane agent processes whose command line names this gateway's data dir. */
function agentPids(dataDir: string): number[] {
  const out = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  return out
    .split('\n')
    .filter((l) => /agents\/(dom|computer)\/main\.js/.test(l))
    .map((l) => Number(l.trim().split(/\s+/)[0]))
    .filter((pid) => {
      try {
        return execFileSync('cat', [`/proc/${pid}/environ`], { encoding: 'utf8' }).includes(dataDir);
      } catch {
        return false;
      }
    });
}

describe('runs end to end on computer_plane, and a plane lost mid-run', function () {
  this.timeout(120_000);
  let gw: TestGateway;
  let site: Site;
  const token = newToken();

  before(async () => {
    site = await startSite();
    gw = await startGateway({
      env: { SERVICE_RUNNER: 'on', SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1' },
      keys: { [token]: { tenant_id: 'desk', rate_limit_per_minute: 0, max_concurrent_runs: 1 } },
    });
  });
  after(async () => {
    await gw.close();
    await site.close();
  });

  it('navigates through the address bar and clicks with xdotool on a real display', async () => {
    const before = site.hits.get('/hit') ?? 0;
    const r = await gw.req('POST', '/v1/predict', {
      token,
      body: {
        detached: false,
        plan: [
          { intent: 'open the counter', type: 'navigate', url: `${site.url}/counter`, required: true },
          { intent: 'press the big button', type: 'click', params: { x: 300, y: 200 } },
          { intent: 'let the request land', type: 'wait', seconds: 0.5 },
          { intent: 'finish', type: 'done' },
          { intent: 'never reached', type: 'wait', seconds: 30 },
        ],
      },
    });
    expect(r.body.status, JSON.stringify(r.body.steps)).to.equal('succeeded');
    expect(r.body.steps.map((s: Body) => s.type)).to.deep.equal(['navigate', 'click', 'wait', 'done']);
    expect((site.hits.get('/counter') ?? 0)).to.be.greaterThanOrEqual(1);
    expect((site.hits.get('/hit') ?? 0) - before).to.equal(1);
    const rec = await gw.gateway.services.runs.get((await gw.gateway.services.tenants.resolve(token))!, r.body.run_id);
    expect(rec.runtime.compute_backend).to.equal('computer_plane');
  });

  it('refuses at submission, naming the step, a plan computer_plane cannot carry out (DOM-only steps, selector-only or target_role-only targets)', async () => {
    const open = { intent: 'open', type: 'navigate', url: `${site.url}/static` };
    const cases: Array<[unknown[], RegExp]> = [
      [[open, { intent: 'capture', type: 'capture_link_in_new_tab', source_selector: 'a' }], /^plan\[1\] \(capture_link_in_new_tab\): needs a DOM-aware plane/],
      [[open, { intent: 'pick', type: 'select_option', params: { dropdown_label: 'Size', option_label: 'L' } }], /^plan\[1\] \(select_option\): needs a DOM-aware plane/],
      [[{ intent: 'loop', type: 'loop', loop_count: 2, steps: [{ intent: 'hit', type: 'click', params: { selector: '#hit' } }] }], /^plan\[0\]\.steps\[0\] \(click\): names its target only by a CSS selector/],
      [[{ intent: 'next', type: 'click', target_role: 'next_page' }], /^plan\[0\] \(click\): names its target only by a target_role/],
    ];
    for (const [plan, detail] of cases) {
      const r = await gw.req('POST', '/v1/predict', { token, body: { plan } });
      expect(r.status, r.text).to.equal(400);
      expect(r.body.detail).to.match(detail);
    }
    // the same steps with a visible target, or on dom_plane, pass the check
    const domOnly = (t: string) => t === 'select_option';
    expect(() => checkPlaneFit('plan', [{ intent: 'hit', type: 'click', params: { selector: '#hit', label: 'hit' } }], 'computer_plane', domOnly)).to.not.throw();
    expect(() => checkPlaneFit('plan', [{ intent: 'hit', type: 'click', target_role: 'x', params: { x: 3, y: 4 } }], 'computer_plane', domOnly)).to.not.throw();
    expect(() => checkPlaneFit('plan', [{ intent: 'pick', type: 'select_option', params: { selector: '#s' } }], 'dom_plane', domOnly)).to.not.throw();
  });

  it('fails the run with plane_lost when its agent dies, releases its limits, and keeps serving', async () => {
    const started = await gw.req('POST', '/v1/predict', {
      token,
      body: { plan: [{ intent: 'open', type: 'navigate', url: `${site.url}/static` }, { intent: 'wait long', type: 'wait', seconds: 60 }] },
    });
    const id = started.body.run_id;
    for (let i = 0; i < 300; i++) {
      const ev = await gw.req('GET', `/v1/runs/${id}/events`, { token });
      if (ev.body.events.some((e: Body) => e.type === 'step.started' && e.data.type === 'wait')) break;
      await sleep(50);
    }
    // the agent serving this run is the one with a session; kill every agent of this gateway but the warm spare
    const pids = agentPids(gw.dir);
    expect(pids.length).to.be.greaterThan(0);
    for (const pid of pids) {
      let hasChild = false;
      try {
        hasChild = execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' }).trim() !== '';
      } catch {
        /* ps exits 1 when the agent has no children: the idle warm spare */
      }
      if (hasChild) process.kill(pid, 'SIGKILL');
    }
    let status: Body = {};
    for (let i = 0; i < 300 && !['failed', 'cancelled', 'succeeded'].includes(status.status); i++) {
      status = (await gw.req('GET', `/v1/runs/${id}`, { token })).body;
      await sleep(50);
    }
    expect(status).to.include({ status: 'failed', halt_class: 'plane_lost' });
    expect(status.failure_help.next_steps.join(' ')).to.match(/fresh workflow_id/);
    expect(await until(async () => (await gw.gateway.services.limits.runningCount('desk')) === 0, 5_000), 'the slot is released (just after the end commits)').to.equal(true);
    expect((await gw.req('GET', '/health')).status).to.equal(200);
    // and the next run works (max_concurrent_runs is 1, so the slot really was released)
    const next = await gw.req('POST', '/v1/predict', { token, body: { detached: false, plan: [{ intent: 'open', type: 'navigate', url: `${site.url}/static` }] } });
    expect(next.body.status).to.equal('succeeded');
  });
});
