// Issue 18: agents that announce themselves. Three agents (two dom_plane, one of
// them with two slots, and one computer_plane) register with a gateway on
// heartbeats; two replicas on one Redis place runs on them: one replica in this
// process, the other its own process, SIGKILLed at the end. Real agents, real
// Redis, real Chromium, Xvfb and xdotool.
import { expect } from 'chai';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { RUNNER_ENV, newToken, request, startGateway, until, type TestGateway } from '../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { startRedis, type RedisHandle } from '../support/redis.ts';
import { startSite, type Site } from '../support/site.ts';
import { startAgentProcess, type AgentProc } from '../planes/support.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const SECRET = 'fleet-agent-secret-0123456789abcdef';
const IDS = { a: 'aaaaaaaaaaa1', b: 'bbbbbbbbbbb2', c: 'ccccccccccc3' };

describe('a fleet of agents that register themselves, behind two replicas (Redis)', function () {
  this.timeout(420_000);
  let redis: RedisHandle;
  let site: Site;
  let r0: TestGateway;
  let r1: GatewayProcess;
  const agents: Record<string, AgentProc> = {};
  const token = newToken();
  const operator = newToken();
  const keys = { [token]: { tenant_id: 'fleet', rate_limit_per_minute: 0, max_concurrent_runs: 30, default_compute_backend: 'dom_plane' }, [operator]: { tenant_id: 'ops', scopes: ['operator'] } };
  const fleetEnv = (redisUrl: string) => ({ ...RUNNER_ENV, SERVICE_REDIS_URL: redisUrl, SERVICE_PLANES: 'fleet', SERVICE_PLANE_SECRET: SECRET, SERVICE_PLANE_WAIT_SECONDS: '120', SERVICE_RUN_LEASE_SECONDS: '6' });
  const agentEnv = (id: string, extra: Record<string, string> = {}) => ({ PLANE_AGENT_SECRET: SECRET, PLANE_REGISTER_URL: r0.url, PLANE_HEARTBEAT_SECONDS: '1', PLANE_SESSION_ORPHAN_SECONDS: '5', PLANE_AGENT_ID: id, ...extra });

  before(async () => {
    [redis, site] = await Promise.all([startRedis(), startSite()]);
    r0 = await startGateway({ env: { ...fleetEnv(redis.url), SERVICE_MAX_ACTIVE_RUNS: '2' }, keys });
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-fleet-r1-'));
    await writeFile(path.join(dir, 'keys.json'), JSON.stringify({ tenant_keys: keys }));
    r1 = await startGatewayProcess({ ...fleetEnv(redis.url), SERVICE_MAX_ACTIVE_RUNS: '6', SERVICE_DATA_DIR: dir, SERVICE_TENANT_KEYS_PATH: path.join(dir, 'keys.json'), SERVICE_LOG_LEVEL: 'info' });
    [agents.a, agents.b, agents.c] = await Promise.all([
      startAgentProcess('dom', agentEnv(IDS.a, { PLANE_CAPACITY: '2', PLANE_LABELS: 'region=eu-west,pool=resi' })),
      // b runs its sessions on chromium-headless-shell: its `browser` label says so
      startAgentProcess('dom', agentEnv(IDS.b, { PLANE_LABELS: 'region=us-east', PLANE_DOM_BROWSER: 'headless-shell' })),
      startAgentProcess('computer', agentEnv(IDS.c)),
    ]);
  });
  after(async () => {
    await r1?.stop().catch(() => undefined);
    await r0?.close().catch(() => undefined);
    for (const a of Object.values(agents)) await a.stop();
    await Promise.all([redis?.stop(), site?.close()]);
  });

  const planes = async (): Promise<Body[]> => (await r0.req('GET', '/v1/planes', { token: operator })).body.agents as Body[];
  const submit = async (via: string, seconds: number, extra: Body = {}) => {
    const plan = [{ intent: 'open', type: 'navigate', url: `${site.url}/counter` }, { intent: 'hold the session', type: 'wait', seconds }];
    const r = await request(via, 'POST', '/v1/predict', { token, body: { plan, detached: true, ...extra } });
    expect(r.status, r.text).to.equal(200);
    return r.body.run_id as string;
  };
  const ended = async (id: string): Promise<Body> => {
    let last: Body = {};
    await until(async () => {
      last = (await r0.req('GET', `/v1/runs/${id}`, { token })).body;
      return ['succeeded', 'failed', 'cancelled'].includes(last.status);
    }, 240_000);
    return last;
  };
  const logs = () => `${r0.logs.join('\n')}\n${r1.stdout()}\n${r1.stderr()}`;
  /** agent id and slot of every placement the replicas logged, by run */
  const placedLines = (text: string): Body[] =>
    text
      .split('\n')
      .filter((l) => l.includes('run placed on a plane agent'))
      .map((l) => JSON.parse(l.slice(l.indexOf('{'))) as Body);
  const placements = () => new Map(placedLines(logs()).map((l) => [l.run_id as string, `${l.agent}:${l.slot}`]));

  it('lists the agents that announced themselves, with capacity and labels; only the agent secret registers', async () => {
    let list: Body[] = [];
    await until(async () => (list = await planes()).length === 3 && list.every((a) => a.state === 'free'), 30_000);
    const byId = Object.fromEntries(list.map((a) => [a.id, a]));
    expect(byId[IDS.a]).to.deep.include({ plane: 'dom_plane', source: 'registered', capacity: 2, busy: 0, labels: { region: 'eu-west', pool: 'resi', browser: 'chromium' } });
    expect(byId[IDS.a].slots.map((s: Body) => s.address)).to.deep.equal([`127.0.0.1:${agents.a!.slots[0]!.grpc_port}`, `127.0.0.1:${agents.a!.slots[1]!.grpc_port}`]);
    expect(byId[IDS.b]).to.deep.include({ plane: 'dom_plane', capacity: 1, labels: { region: 'us-east', browser: 'headless-shell' } });
    expect(byId[IDS.c]).to.deep.include({ plane: 'computer_plane', capacity: 1, labels: { browser: 'chromium' } });
    const reg = { agent_id: '0123456789ab', plane: 'dom_plane', slots: ['grpc://10.0.0.9:7443'] };
    expect((await request(r0.url, 'POST', '/v1/planes/register', { body: reg })).status, 'no credentials').to.equal(401);
    expect((await request(r0.url, 'POST', '/v1/planes/register', { body: reg, headers: { authorization: 'Bearer wrong' } })).status, 'a wrong secret').to.equal(401);
    expect((await request(r0.url, 'POST', '/v1/planes/register', { body: reg, headers: { authorization: `Bearer ${token}` } })).status, 'a tenant token').to.equal(401);
    const auth = { authorization: `Bearer ${SECRET}` };
    for (const bad of [{ ...reg, agent_id: '../../x' }, { ...reg, slots: ['file:///etc/passwd'] }, { ...reg, slots: ['grpc://h:1/path?q'] }, { ...reg, labels: { 'A B': 'x' } }, { ...reg, slots: Array(17).fill('grpc://h:1') }, { ...reg, extra: 1 }]) {
      const r = await request(r0.url, 'POST', '/v1/planes/register', { body: bad, headers: auth });
      expect(r.status, JSON.stringify(bad).slice(0, 120)).to.equal(400);
      expect(r.body.detail).to.be.a('string');
    }
    expect((await planes()).length, 'nothing refused joined the fleet').to.equal(3);
  });

  it('runs 12 at once (dom and computer) on four slots: all succeed, spread over every slot, never two on one slot, the rest queued until a slot frees', async () => {
    const ids = await Promise.all(
      Array.from({ length: 12 }, (_, i) => submit(i % 2 ? r1.url : r0.url, 1.5, i % 4 === 3 ? { compute_backend: 'computer_plane' } : {})),
    );
    let sawWaiting = false;
    const watch = setInterval(() => {
      void Promise.all(ids.map((id) => r0.req('GET', `/v1/runs/${id}`, { token }))).then((rs) => {
        if (rs.some((r) => r.body.status === 'queued' && r.body.phase === 'waiting_for_plane')) sawWaiting = true;
      });
    }, 200);
    const ends = await Promise.all(ids.map(ended)).finally(() => clearInterval(watch));
    expect(ends.map((e) => e.status), JSON.stringify(ends.map((e) => [e.halt_class, e.error, e.runtime?.compute_backend, e.events?.slice(-3)]))).to.deep.equal(Array(12).fill('succeeded'));
    expect(logs(), 'no agent was ever asked for a second session on one slot').to.not.include('plane agent refused a session');
    const placed = placements();
    expect(new Set(ids.map((id) => placed.get(id)))).to.deep.equal(new Set([`${IDS.a}:0`, `${IDS.a}:1`, `${IDS.b}:0`, `${IDS.c}:0`]));
    for (const [i, id] of ids.entries()) expect(placed.get(id)!.startsWith(i % 4 === 3 ? IDS.c : IDS.a) || placed.get(id)!.startsWith(IDS.b), `${id} on its plane`).to.equal(true);
    expect(sawWaiting, 'a run beyond the free slots was seen queued, waiting_for_plane').to.equal(true);
    const events = (await r0.req('GET', `/v1/runs/${ids[0]}/events`, { token })).text;
    expect(events).to.include('"status":"running"');
    // per-agent metrics: placements, and the slots held back at 0 once the sessions closed
    let metrics = '';
    const idle = await until(async () => !/service_plane_agent_busy\{agent="[0-9a-f]{12}"\} [1-9]/.test((metrics = await (await fetch(`${r0.url}/metrics`)).text())), 20_000);
    expect(idle, metrics.split('\n').filter((l) => l.includes('plane_agent_busy')).join('\n')).to.equal(true);
    expect(metrics).to.match(/service_plane_placements_total\{agent="[0-9a-f]{12}",outcome="placed"\} [1-9]/);
    expect(metrics).to.match(/service_plane_session_start_seconds_count\{agent="[0-9a-f]{12}"\} [1-9]/);
  });

  it('places a run with plane_labels only on an agent carrying them, and fails one no agent can take at once', async () => {
    const eu = await Promise.all([submit(r0.url, 0.3, { plane_labels: { region: 'eu-west' } }), submit(r1.url, 0.3, { plane_labels: { pool: 'resi' } })]);
    expect((await Promise.all(eu.map(ended))).map((e) => e.status)).to.deep.equal(['succeeded', 'succeeded']);
    for (const id of eu) expect(placements().get(id)).to.match(new RegExp(`^${IDS.a}:`));
    // the browser label: a run that needs the full browser (stealth) and one that takes the shell
    const [full, shell] = await Promise.all([submit(r0.url, 0.3, { plane_labels: { browser: 'chromium' } }), submit(r1.url, 0.3, { plane_labels: { browser: 'headless-shell' } })]);
    expect((await Promise.all([full, shell].map(ended))).map((e) => e.status)).to.deep.equal(['succeeded', 'succeeded']);
    expect(placements().get(full)).to.match(new RegExp(`^${IDS.a}:`));
    expect(placements().get(shell)).to.match(new RegExp(`^${IDS.b}:`));
    const none = await request(r0.url, 'POST', '/v1/predict', { token, body: { plan: [{ intent: 'open', type: 'navigate', url: `${site.url}/counter` }], plane_labels: { region: 'mars' }, detached: false } });
    expect(none.body.status, none.text).to.equal('failed');
    expect(none.body.summary).to.include('no dom_plane agent has the labels');
    expect((await ended(none.body.run_id)).halt_class).to.equal('plane_unavailable');
    const hostile = await request(r0.url, 'POST', '/v1/predict', { token, body: { plan: [{ intent: 'open', type: 'navigate', url: `${site.url}/counter` }], plane_labels: { region: 'x'.repeat(65) } } });
    expect(hostile.status).to.equal(400);
  });

  it('ends the run of an agent killed mid-run plane_lost, drops the agent from the fleet, and places runs on it again once it is back', async () => {
    const long = await submit(r0.url, 6, { plane_labels: { region: 'us-east' } });
    await until(async () => (await r0.req('GET', `/v1/runs/${long}`, { token })).body.phase === 'running', 60_000);
    agents.b!.child.kill('SIGKILL');
    expect((await ended(long)).halt_class).to.equal('plane_lost');
    // its registration lapses (three missed heartbeats, 10 s at least)
    expect(await until(async () => !(await planes()).some((a) => a.id === IDS.b), 25_000), 'B left the fleet').to.equal(true);
    const meanwhile = await ended(await submit(r1.url, 0.3));
    expect(meanwhile.status).to.equal('succeeded');
    expect(placements().get(meanwhile.run_id)).to.match(new RegExp(`^${IDS.a}:`));
    agents.b = await startAgentProcess('dom', agentEnv(IDS.b, { PLANE_LABELS: 'region=us-east', PLANE_DOM_BROWSER: 'headless-shell' }));
    expect(await until(async () => (await planes()).some((a) => a.id === IDS.b && a.state === 'free'), 20_000), 'B is back').to.equal(true);
    const back = await ended(await submit(r0.url, 0.3, { plane_labels: { region: 'us-east' } }));
    expect(back.status, back.summary).to.equal('succeeded');
    expect(placements().get(back.run_id)).to.equal(`${IDS.b}:0`);
  });

  it('drains an agent mid-run: its run finishes, new runs go to the others until it is undrained', async () => {
    const held = await submit(r0.url, 4, { plane_labels: { region: 'eu-west' } });
    await until(async () => (await r0.req('GET', `/v1/runs/${held}`, { token })).body.phase === 'running', 60_000);
    const drained = await r0.req('POST', `/v1/planes/${IDS.a}/drain`, { token: operator });
    expect(drained.status, drained.text).to.equal(200);
    expect(drained.body).to.include({ id: IDS.a, draining: true });
    const others = await Promise.all([submit(r0.url, 0.3), submit(r1.url, 0.3)]);
    const ends = await Promise.all([held, ...others].map(ended));
    expect(ends.map((e) => e.status), JSON.stringify(ends.map((e) => e.summary))).to.deep.equal(['succeeded', 'succeeded', 'succeeded']);
    expect(placements().get(held)).to.match(new RegExp(`^${IDS.a}:`));
    for (const id of others) expect(placements().get(id), 'a drained agent takes no new run').to.equal(`${IDS.b}:0`);
    expect((await r0.req('POST', `/v1/planes/${IDS.a}/undrain`, { token: operator })).body.draining).to.equal(false);
    const again = await ended(await submit(r1.url, 0.3, { plane_labels: { region: 'eu-west' } }));
    expect(again.status).to.equal('succeeded');
  });

  it('frees the slots of a replica SIGKILLed mid-run within the lease, and the agents take runs on them again', async () => {
    // R0 runs at most two at once: of three long runs, R1 executes at least one
    const ids = await Promise.all([0, 1, 2].map(() => submit(r1.url, 60)));
    // every run holds a slot once its session is bound (the replica logs the placement then)
    expect(await until(async () => ids.every((id) => placements().has(id)), 90_000), 'all three runs placed').to.equal(true);
    const onR1 = ids.filter((id) => placedLines(`${r1.stdout()}\n${r1.stderr()}`).some((l) => l.run_id === id));
    expect(onR1.length, 'R1 executes some of them').to.be.greaterThan(0);
    r1.child.kill('SIGKILL');
    const killedAt = Date.now();
    await until(async () => {
      const now = (await planes()).flatMap((a) => a.slots.map((s: Body) => s.run_id));
      return onR1.every((id) => !now.includes(id));
    }, 30_000);
    const freedAfterMs = Date.now() - killedAt;
    expect(freedAfterMs, 'slots free within the 6 s lease (and a poll)').to.be.lessThan(6000 + 2500);
    for (const id of ids.filter((x) => !onR1.includes(x))) await r0.req('POST', `/v1/runs/${id}/cancel`, { token });
    // the agents let go of the dead replica's sessions (its streams broke): every slot is free and unbound again
    let slots: Body[] = [];
    const idle = await until(async () => (slots = (await planes()).flatMap((a) => a.slots)).every((s) => s.run_id === null && !s.session_bound), 30_000);
    expect(idle, JSON.stringify(slots)).to.equal(true);
    const next = await ended(await submit(r0.url, 0.3));
    expect(next.status, next.summary).to.equal('succeeded');
  });
});
