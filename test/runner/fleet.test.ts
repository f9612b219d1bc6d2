// Issue 18, first slice: several remote agents per plane behind two gateway
// replicas on one Redis. Runs are placed on a free agent by a slot claim in the
// shared store, so no agent is ever asked for two sessions at once; runs beyond
// the free agents wait instead of failing `busy`; an agent killed mid-run ends
// its run plane_lost and later runs go to the others. Real agent processes,
// real Redis, real Chromium.
import { expect } from 'chai';
import { RUNNER_ENV, newToken, startGateway, until, type TestGateway } from '../support/gateway.ts';
import { startRedis, type RedisHandle } from '../support/redis.ts';
import { startSite, type Site } from '../support/site.ts';
import { startAgentProcess, type AgentProc } from '../planes/support.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('a fleet of remote dom_plane agents behind two replicas (Redis)', function () {
  this.timeout(300_000);
  let redis: RedisHandle;
  let site: Site;
  let agents: AgentProc[] = [];
  const replicas: TestGateway[] = [];
  const token = newToken();
  const operator = newToken();

  before(async () => {
    [redis, site] = await Promise.all([startRedis(), startSite()]);
    agents = await Promise.all([startAgentProcess('dom'), startAgentProcess('dom')]);
    const planes = agents.map((a) => `dom_plane=grpc://127.0.0.1:${a.grpcPort}`).join(',');
    const keys = { [token]: { tenant_id: 'fleet', rate_limit_per_minute: 0, max_concurrent_runs: 20, default_compute_backend: 'dom_plane' }, [operator]: { tenant_id: 'ops', scopes: ['operator'] } };
    for (let i = 0; i < 2; i++) {
      replicas.push(await startGateway({ env: { ...RUNNER_ENV, SERVICE_REDIS_URL: redis.url, SERVICE_PLANES: planes, SERVICE_MAX_ACTIVE_RUNS: '4', SERVICE_PLANE_WAIT_SECONDS: '120' }, keys }));
    }
  });
  after(async () => {
    for (const g of replicas) await g.close().catch(() => undefined);
    for (const a of agents) await a.stop();
    await Promise.all([redis?.stop(), site?.close()]);
  });

  const submit = async (g: TestGateway, seconds: number) => {
    const plan = [{ intent: 'open', type: 'navigate', url: `${site.url}/counter` }, { intent: 'hold the session', type: 'wait', seconds }];
    const r = await g.req('POST', '/v1/predict', { token, body: { plan, detached: true } });
    expect(r.status, r.text).to.equal(200);
    return r.body.run_id as string;
  };
  const ended = async (id: string): Promise<Body> => {
    let last: Body = {};
    await until(async () => {
      last = (await replicas[0]!.req('GET', `/v1/runs/${id}`, { token })).body;
      return ['succeeded', 'failed', 'cancelled'].includes(last.status);
    }, 180_000);
    return last;
  };
  const logs = () => replicas.flatMap((g) => g.logs).join('\n');

  it('runs six at once on two agents: all succeed, spread over both, none refused as busy', async () => {
    const ids = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => submit(replicas[i % 2]!, 1.5)));
    const ends = await Promise.all(ids.map(ended));
    expect(ends.map((e) => e.status), JSON.stringify(ends.map((e) => e.summary))).to.deep.equal(Array(6).fill('succeeded'));
    const placed = [...logs().matchAll(/"agent":"([0-9a-f]{12})"[^\n]*run placed on a plane agent/g)].map((m) => m[1]);
    expect(new Set(placed).size, 'both agents served runs').to.equal(2);
    expect(logs(), 'no agent was ever asked for a second session').to.not.include('plane agent refused a session');
  });

  it('lists the agents for an operator, and a drained agent takes no new run until it is undrained', async () => {
    expect((await replicas[0]!.req('GET', '/v1/planes', { token })).status, 'a tenant token without the operator scope').to.equal(403);
    // a run's session closes just after its end: the slots come free then
    let list: Body = {};
    await until(async () => {
      list = (await replicas[1]!.req('GET', '/v1/planes', { token: operator })).body;
      return (list.agents as Body[]).every((a) => a.state === 'free');
    }, 20_000);
    expect(list.mode).to.equal('remote');
    expect(list.agents.map((a: Body) => [a.plane, a.state, a.reachable])).to.deep.equal([['dom_plane', 'free', true], ['dom_plane', 'free', true]]);
    expect(list.agents.map((a: Body) => a.address)).to.deep.equal(agents.map((a) => `127.0.0.1:${a.grpcPort}`));
    const [first, second] = list.agents as Body[];
    const drained = await replicas[0]!.req('POST', `/v1/planes/${first!.id}/drain`, { token: operator });
    expect(drained.body).to.include({ id: first!.id, state: 'draining', draining: true });
    const before = replicas.map((g) => g.logs.length);
    const ids = await Promise.all([submit(replicas[0]!, 0.5), submit(replicas[1]!, 0.5)]);
    expect((await Promise.all(ids.map(ended))).map((e) => e.status)).to.deep.equal(['succeeded', 'succeeded']);
    const placed = [...replicas.flatMap((g, i) => g.logs.slice(before[i])).join('\n').matchAll(/"agent":"([0-9a-f]{12})"[^\n]*run placed on a plane agent/g)].map((m) => m[1]);
    expect(new Set(placed), 'only the undrained agent took runs').to.deep.equal(new Set([second!.id]));
    expect((await replicas[1]!.req('POST', `/v1/planes/${first!.id}/undrain`, { token: operator })).body.state).to.equal('free');
    expect((await replicas[1]!.req('POST', '/v1/planes/0123456789ab/drain', { token: operator })).status, 'unknown agent').to.equal(404);
    expect((await replicas[1]!.req('POST', '/v1/planes/..%2F..%2Fx/drain', { token: operator })).status).to.equal(404);
    const metrics = await (await fetch(`${replicas[0]!.url}/metrics`)).text();
    expect(metrics).to.match(new RegExp(`service_plane_placements_total\\{agent="${second!.id}",outcome="placed"\\} [1-9]`));
  });

  it('ends the run of an agent killed mid-run plane_lost, and places the next runs on the other', async () => {
    const ids = await Promise.all([submit(replicas[0]!, 8), submit(replicas[1]!, 8)]);
    const bothRunning = await until(async () => {
      const all = await Promise.all(ids.map(async (id) => (await replicas[0]!.req('GET', `/v1/runs/${id}`, { token })).body.phase));
      return all.every((p) => p === 'running');
    }, 60_000);
    expect(bothRunning, 'one run on each agent').to.equal(true);
    agents[1]!.child.kill('SIGKILL');
    const ends = await Promise.all(ids.map(ended));
    expect(ends.map((e) => e.halt_class ?? 'none').sort()).to.deep.equal(['none', 'plane_lost']);
    const next = await Promise.all([submit(replicas[0]!, 0.5), submit(replicas[1]!, 0.5)]);
    const after = await Promise.all(next.map(ended));
    expect(after.map((e) => e.status), JSON.stringify(after.map((e) => e.summary))).to.deep.equal(['succeeded', 'succeeded']);
    let states: string[] = [];
    await until(async () => {
      states = ((await replicas[0]!.req('GET', '/v1/planes', { token: operator })).body.agents as Body[]).map((a) => a.state);
      return states[0] === 'free';
    }, 20_000);
    expect(states).to.deep.equal(['free', 'unreachable']);
  });

  it('fails a run at once whose plane has no agent at all', async () => {
    const r = await replicas[0]!.req('POST', '/v1/predict', { token, body: { plan: [{ intent: 'open', type: 'navigate', url: `${site.url}/static` }], detached: false, compute_backend: 'computer_plane' } });
    expect(r.body.status).to.equal('failed');
    const life = (await replicas[0]!.req('GET', `/v1/runs/${r.body.run_id}`, { token })).body;
    expect(life.halt_class).to.equal('plane_unavailable');
    expect(life.summary ?? r.body.summary).to.include('no computer_plane agent is configured');
  });
});
