// Issue 10 regressions: a run stopped at any point of its life (cancel, time cap)
// never takes the gateway down and leaves no agent, browser, display or recorder
// behind; deep loops keep listeners and memory flat. The gateway runs as its own
// process (what `npm start` runs) with two tenants and real local agents.
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newToken, request, sleep, type TestResponse } from '../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { startSite, type Site } from '../support/site.ts';
import { startFakeModel, type FakeModel } from '../support/fake-model.ts';
import { cmdline, descendants } from '../planes/support.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
type Plane = 'dom_plane' | 'computer_plane';

type Kind = 'browser' | 'xvfb' | 'ffmpeg';
const kindOf = (cmd: string): Kind | undefined =>
  /chromium/.test(cmd) && !cmd.includes('--type=') ? 'browser' : /(^|\/)Xvfb /.test(cmd) ? 'xvfb' : /(^|\/)ffmpeg /.test(cmd) ? 'ffmpeg' : undefined;

/**
 * The processes a run may own, in the gateway's process tree: its agents, and for
 * each the browsers, displays and recorders below it; `stray`: any of those that
 * is not below an agent. The counts by kind are per agent: an idle local agent
 * keeps a warm pool of one (gateway/runner/agent-pool.ts), refilled in the
 * background after each session, so its total moves while the pools fill.
 */
function census(root: number): { agents: number; most: Record<Kind, number>; stray: string[] } {
  const agents = descendants(root).filter((pid) => /agents\/(computer|dom)\/main\.js/.test(cmdline(pid)));
  const owned = new Set<number>();
  const most: Record<Kind, number> = { browser: 0, xvfb: 0, ffmpeg: 0 };
  for (const agent of agents) {
    const mine: Record<Kind, number> = { browser: 0, xvfb: 0, ffmpeg: 0 };
    for (const pid of descendants(agent)) {
      owned.add(pid);
      const kind = kindOf(cmdline(pid));
      if (kind) mine[kind]++;
    }
    for (const k of Object.keys(mine) as Kind[]) most[k] = Math.max(most[k], mine[k]);
  }
  const stray = descendants(root).filter((pid) => !owned.has(pid) && kindOf(cmdline(pid)) !== undefined).map((pid) => `${pid} ${cmdline(pid).slice(0, 120)}`);
  return { agents: agents.length, most, stray };
}

describe('runs stopped at any point (gateway process, two tenants, real agents)', function () {
  this.timeout(600_000);
  const alpha = newToken();
  const beta = newToken();
  let gw: GatewayProcess;
  let site: Site;
  let fake: FakeModel;
  let slow: Server;
  let slowUrl: string;

  before(async () => {
    [site, fake] = await Promise.all([startSite(), startFakeModel()]);
    // a page whose response never comes while the test runs: a navigation to it is in flight until cancelled
    slow = createServer(() => undefined);
    slow.listen(0, '127.0.0.1');
    await once(slow, 'listening');
    slowUrl = `http://127.0.0.1:${(slow.address() as AddressInfo).port}/never`;
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-abort-'));
    await mkdir(path.join(dir, 'secrets'));
    await writeFile(path.join(dir, 'keys.json'), JSON.stringify({ tenant_keys: { [alpha]: { tenant_id: 'alpha', rate_limit_per_minute: 0, max_concurrent_runs: 50 }, [beta]: { tenant_id: 'beta', rate_limit_per_minute: 0 } } }));
    await writeFile(path.join(dir, 'brains.json'), JSON.stringify({ brains: { 'default-cua': { protocol: 'openai-chat', base_url: fake.url, model: 'fake-default' } } }));
    gw = await startGatewayProcess({
      SERVICE_DATA_DIR: dir,
      SERVICE_TENANT_KEYS_PATH: path.join(dir, 'keys.json'),
      SERVICE_BRAINS_PATH: path.join(dir, 'brains.json'),
      SERVICE_RUNNER: 'on',
      SERVICE_PLANES: 'local',
      SERVICE_ALLOW_PRIVATE_NETWORKS: '1',
      SERVICE_MAX_ACTIVE_RUNS: '2',
      SERVICE_LOG_LEVEL: 'warn',
      // the production pool: a spare agent per used plane, which must be left behind no more than the rest
      SERVICE_PLANE_SPARE: '1',
      // the deep loop ends at this cap (budget_cap), not at its 1-minute time cap (see the test)
      SERVICE_MAX_RUN_STEPS: '300',
    });
  });
  after(async () => {
    await gw?.stop();
    slow?.closeAllConnections();
    slow?.close();
    await Promise.all([site?.close(), fake?.close()]);
  });

  const req = (method: string, p: string, token: string, body?: unknown): Promise<TestResponse> => request(gw.url, method, p, { token, body });

  async function start(plan: unknown[], backend: Plane, extra: Body = {}): Promise<string> {
    const r = await req('POST', '/v1/predict', alpha, { plan, compute_backend: backend, ...extra });
    expect(r.status, r.text).to.equal(200);
    return r.body.run_id as string;
  }

  async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 60_000, every = 5): Promise<T> {
    const end = Date.now() + ms;
    for (;;) {
      expect(gw.child.exitCode, `the gateway exited while waiting for ${what}:\n${gw.stderr().slice(-3000)}`).to.equal(null);
      const v = await fn();
      if (v !== undefined) return v;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await sleep(every);
    }
  }

  const status = async (id: string): Promise<Body> => (await req('GET', `/v1/runs/${id}`, alpha)).body as Body;
  const ended = (id: string) => until(`run ${id} to end`, async () => ((s) => (['succeeded', 'failed', 'cancelled'].includes(s.status) ? s : undefined))(await status(id)), 60_000, 50);
  const events = async (id: string): Promise<string[]> => ((await req('GET', `/v1/runs/${id}/events`, alpha)).body.events as Body[]).map((e) => e.type as string);

  async function stillServes(): Promise<void> {
    expect(gw.child.exitCode, gw.stderr().slice(-3000)).to.equal(null);
    const other = await req('POST', '/v1/predict', beta, { plan: [{ intent: 'nothing', type: 'wait', seconds: 0 }], compute_backend: 'dom_plane', detached: false });
    expect(other.status, other.text).to.equal(200);
    expect(other.body.status).to.equal('succeeded');
    const metrics = await request(gw.url, 'GET', '/metrics');
    expect(metrics.text).to.match(/^service_unhandled_rejections_total 0$/m);
    const bad = gw.stderr().split('\n').filter((l) => /MaxListenersExceededWarning|unhandled promise rejection/.test(l));
    expect(bad, bad.join('\n').slice(0, 3000)).to.deep.equal([]);
  }

  const quickSteps = Array.from({ length: 400 }, (_, i) => ({ intent: `tick ${i}`, type: 'wait', seconds: 0 }));
  const points: Array<{ name: string; plan: () => unknown[]; when: (id: string) => Promise<unknown>; halts?: string }> = [
    { name: 'while its plane starts', plan: () => [{ intent: 'wait', type: 'wait', seconds: 30 }], when: (id) => until('phase starting', async () => ((await status(id)).phase !== 'queued' ? true : undefined), 60_000, 20) },
    { name: 'right after its plane is up', plan: () => [{ intent: 'wait', type: 'wait', seconds: 30 }], when: (id) => until('phase running', async () => ((await status(id)).phase === 'running' ? true : undefined)) },
    { name: 'mid-step', halts: 'wait', plan: () => [{ intent: 'wait', type: 'wait', seconds: 30 }], when: (id) => until('step.started', async () => ((await events(id)).includes('step.started') ? true : undefined), 60_000, 20) },
    { name: 'between quick steps', plan: () => quickSteps, when: (id) => until('a few steps', async () => ((await events(id)).filter((t) => t === 'step.finished').length >= 5 ? true : undefined), 60_000, 20) },
    {
      name: 'mid-navigation',
      halts: 'navigate',
      plan: () => [{ intent: 'open a page that never answers', type: 'navigate', url: slowUrl }],
      when: (id) => until('step.started', async () => ((await events(id)).includes('step.started') ? true : undefined), 60_000, 20).then(() => sleep(300)),
    },
    {
      name: 'mid-brain-call',
      halts: 'default-cua',
      plan: () => [
        { intent: 'open', type: 'navigate', url: `${site.url}/static` },
        { intent: 'press the hit button', type: 'default-cua', max_steps: 3 },
      ],
      when: async () => {
        const before = fake.requests.length;
        fake.failNext(1, 'hang');
        await until('the model call', async () => (fake.requests.length > before ? true : undefined), 60_000, 20);
      },
    },
  ];

  for (const backend of ['dom_plane', 'computer_plane'] as const) {
    it(`cancels runs at every point of their life on ${backend}; the gateway keeps serving every tenant`, async () => {
      for (const point of points) {
        const id = await start(point.plan(), backend);
        await point.when(id);
        const c = await req('POST', `/v1/runs/${id}/cancel`, alpha);
        expect(c.status, `${point.name}: ${c.text}`).to.equal(200);
        const end = await ended(id);
        expect([end.status, end.halt_class], `${point.name}: ${end.summary}`).to.deep.equal(['cancelled', 'cancelled']);
        expect(end.failure_help, point.name).to.be.an('object');
        if (point.halts) {
          // the step the cancel interrupted has its entry: what the page showed and why the run stopped
          const last = ((await req('GET', `/v1/runs/${id}/result`, alpha)).body.steps as Body[]).at(-1)!;
          expect(last, point.name).to.include({ type: point.halts, success: false });
          expect(last.data, point.name).to.match(/^halted \(cancelled\)/);
          // a tab still waiting for its first byte may not answer a screenshot within the entry's 5 s
          if (point.halts !== 'navigate') expect(last.screenshot_b64, point.name).to.be.a('string');
        }
      }
      await stillServes();
    });
  }

  it('refuses a max_time_minutes too short for a browser run (400 {detail})', async () => {
    const r = await req('POST', '/v1/predict', alpha, { plan: [{ intent: 'wait', type: 'wait', seconds: 1 }], max_time_minutes: 0.005 });
    expect(r.status).to.equal(400);
    expect(r.body.detail).to.match(/max_time_minutes.*0\.1/);
  });

  it('leaves no agent, browser, display or recorder of a run behind after a cancel during start or a tiny time cap', async () => {
    // both planes warm: each has had a run and holds one spare agent (a plane the tests before
    // used is warm already: a computer_plane run costs a display, a browser and a recording)
    const agentOf = (backend: Plane) => descendants(gw.child.pid!).some((pid) => cmdline(pid).includes(`agents/${backend === 'dom_plane' ? 'dom' : 'computer'}/main.js`));
    for (const backend of ['dom_plane', 'computer_plane'] as const) if (!agentOf(backend)) await ended(await start([{ intent: 'nothing', type: 'wait', seconds: 0 }], backend));
    await sleep(5000);
    const baseline = census(gw.child.pid!);
    expect(baseline.agents, JSON.stringify(baseline)).to.be.greaterThan(0);
    const ids: string[] = [];
    for (const backend of ['dom_plane', 'computer_plane'] as const) {
      for (let i = 0; i < 3; i++) {
        const id = await start([{ intent: 'wait', type: 'wait', seconds: 30 }], backend);
        await until('status running', async () => ((await status(id)).status === 'running' ? true : undefined));
        await req('POST', `/v1/runs/${id}/cancel`, alpha);
        ids.push(id);
      }
      const capped = await start([{ intent: 'wait too long', type: 'wait', seconds: 60 }], backend, { max_time_minutes: 0.1 });
      ids.push(capped);
    }
    const ends = await Promise.all(ids.map(ended));
    expect(ends.map((e) => e.halt_class), JSON.stringify(ends.map((e) => e.summary))).to.deep.equal(['cancelled', 'cancelled', 'cancelled', 'time_cap', 'cancelled', 'cancelled', 'cancelled', 'time_cap']);
    // settled: no more agents than before, no process outside an agent, and each agent back to its warm pool of one
    const settled = (c: ReturnType<typeof census>): boolean => c.agents <= baseline.agents && c.stray.length === 0 && c.most.browser <= 1 && c.most.xvfb <= 1 && c.most.ffmpeg <= 1;
    let now = census(gw.child.pid!);
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && !settled(now)) {
      await sleep(250);
      now = census(gw.child.pid!);
    }
    expect(now, `now ${JSON.stringify(now)}, baseline ${JSON.stringify(baseline)}: ${descendants(gw.child.pid!).map((p) => `${p} ${cmdline(p).slice(0, 120)}`).join('\n')}`).to.satisfy(settled);
    await stillServes();
  });

  for (const backend of ['dom_plane', 'computer_plane'] as const) {
    it(`halts a run with plane_lost when its browser is killed mid-run on ${backend}; later steps never report success`, async () => {
      const id = await start(
        [
          { intent: 'open', type: 'navigate', url: `${site.url}/static` },
          { intent: 'wait', type: 'wait', seconds: 3 },
          { intent: 'open again', type: 'navigate', url: `${site.url}/counter` },
          { intent: 'and again', type: 'navigate', url: `${site.url}/static` },
        ],
        backend,
      );
      await until('the wait step', async () => ((await events(id)).filter((t) => t === 'step.started').length >= 2 ? true : undefined), 60_000, 20);
      // the run's browser, and the warm browsers of idle dom_plane agents with it: the next run that borrows one must find it dead and launch its own
      const browsers = descendants(gw.child.pid!).filter((p) => /chromium/.test(cmdline(p)) && !cmdline(p).includes('--type='));
      expect(browsers.length, 'the run has a browser').to.be.greaterThan(0);
      for (const p of browsers) process.kill(p, 'SIGKILL');
      const end = await ended(id);
      expect([end.status, end.halt_class], end.summary).to.deep.equal(['failed', 'plane_lost']);
      expect(end.failure_help.halt_class).to.equal('plane_lost');
      const steps = (await req('GET', `/v1/runs/${id}/result`, alpha)).body.steps as Body[];
      expect(steps.slice(2).every((s) => s.success === false), JSON.stringify(steps.map((s) => [s.type, s.success]))).to.equal(true);
      await stillServes();
    });
  }

  it('runs five nested loops of 50 without piling listeners on the run signal, with a bounded number of events', async () => {
    const nest = (depth: number): Body => (depth === 0 ? { intent: 'tick', type: 'wait', seconds: 0 } : { intent: `loop ${depth}`, type: 'loop', loop_count: 50, steps: [nest(depth - 1)] });
    // its trace without a screenshot per step (capture_mode trace): with them, a step cost 0.2 CPU-s and
    // 250 ms here, and the minute's time cap ended the run at about 250 steps for 40-60 CPU-s. The
    // listeners and events in question are the loops' and the steps' (plane calls do not listen on the run's signal).
    const id = await start([nest(5)], 'dom_plane', { max_time_minutes: 1, capture_mode: 'trace' });
    const end = await until('the deep loop to end', async () => ((s) => (['succeeded', 'failed', 'cancelled'].includes(s.status) ? s : undefined))(await status(id)), 120_000, 500);
    // the gateway's step cap (300), or on a host too slow for that the time cap
    expect(end.halt_class, end.summary).to.be.oneOf(['budget_cap', 'time_cap']);
    const all = await events(id);
    const steps = all.filter((t) => t === 'step.finished').length;
    // a listener per step would pass node's 10 long before (stillServes reads the warnings)
    expect(steps).to.be.greaterThan(100);
    // two events a step, loop iterations coalesced past 10 per loop (14 events for the inner loop's 50 steps):
    // far fewer than one per iteration
    expect(all.filter((t) => t === 'loop.iteration').length, `${all.length} events for ${steps} steps`).to.be.lessThan(steps / 2);
    await stillServes();
  });
});
