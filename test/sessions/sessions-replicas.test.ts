// Sessions behind two replicas (one in this process, one its own process) sharing
// Redis, with a dom_plane agent that registers itself: a client re-attaches through the
// other replica and finds its page; a release on one replica ends the session its peer
// owns; SIGKILL of the owning replica: the survivor relaying a client takes the session
// over, and a session whose agent closed it meanwhile ends gateway_lost; one nobody looks
// at is found by the survivor's sweep; the agent's slot comes free every way. Real Redis, agents, Chromium.
import { expect } from 'chai';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { newToken, request, startGateway, until, type TestGateway } from '../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { startRedis, type RedisHandle } from '../support/redis.ts';
import { startSite, type Site } from '../support/site.ts';
import { startAgentProcess, type AgentProc } from '../planes/support.ts';
import { connectPlane } from '../../gateway/planes/index.ts';
import type { SessionRecord } from '../../gateway/sessions/records.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const SECRET = 'sessions-agent-secret-0123456789abcd';

describe('browser sessions behind two replicas (Redis, a registered agent)', function () {
  this.timeout(300_000);
  let redis: RedisHandle;
  let site: Site;
  let r0: TestGateway;
  let r1: GatewayProcess;
  let agent: AgentProc;
  const token = newToken();
  const operator = newToken();
  const keys = { [token]: { tenant_id: 'acme', rate_limit_per_minute: 0, max_concurrent_runs: 4 }, [operator]: { tenant_id: 'ops', scopes: ['operator'] } };
  const env = (redisUrl: string) => ({ SERVICE_REDIS_URL: redisUrl, SERVICE_PLANES: 'fleet', SERVICE_PLANE_SECRET: SECRET, SERVICE_RUN_LEASE_SECONDS: '6', SERVICE_ALLOW_PRIVATE_NETWORKS: '1' });
  const headers = { 'X-Service-Token': token };

  before(async () => {
    [redis, site] = await Promise.all([startRedis(), startSite()]);
    r0 = await startGateway({ env: env(redis.url), keys });
    r1 = await startReplica();
    agent = await startAgentProcess('dom', { PLANE_AGENT_SECRET: SECRET, PLANE_REGISTER_URL: r0.url, PLANE_HEARTBEAT_SECONDS: '1', PLANE_SESSION_ORPHAN_SECONDS: '5', PLANE_AGENT_ID: '5e55a9e00001' });
    expect(await until(async () => ((await r0.req('GET', '/v1/planes', { token: operator })).body.agents as Body[]).length === 1, 30_000)).to.equal(true);
  });
  after(async () => {
    await r1?.stop().catch(() => undefined);
    await r0?.close().catch(() => undefined);
    await agent?.stop();
    await Promise.all([redis?.stop(), site?.close()]);
  });

  const agentFree = async (): Promise<boolean> => {
    const agents = (await r0.req('GET', '/v1/planes', { token: operator })).body.agents as Body[];
    return agents.length === 1 && agents[0]!.state === 'free';
  };
  const get = async (id: string): Promise<Body> => (await r0.req('GET', `/v1/sessions/${id}`, { token })).body as Body;

  it('a session made on one replica is driven and re-attached through the other; a release on either ends it on its owner', async () => {
    const made = await request(r1.url, 'POST', '/v1/sessions', { token, body: { keep_alive: true, idle_timeout_seconds: 60 } });
    expect(made.status, made.text).to.equal(200);
    const id = made.body.session_id as string;
    const viaR0 = `${r0.url.replace('http', 'ws')}/v1/sessions/${id}/cdp`;
    const first = await puppeteer.connect({ browserWSEndpoint: viaR0, headers });
    const page = await first.newPage();
    await page.goto(`${site.url}/list?page=2`);
    await first.disconnect();
    // the owner (r1) saw a client through its peer: still live, kept alive
    expect((await get(id)).status).to.equal('live');
    const ticket = await request(r0.url, 'POST', `/v1/sessions/${id}/connect`, { token });
    const again = await puppeteer.connect({ browserWSEndpoint: (ticket.body.connect_url as string).replace(r0.url.replace('http', 'ws'), r1.url.replace('http', 'ws')) });
    const urls = (await again.pages()).map((p) => p.url());
    expect(urls).to.include(`${site.url}/list?page=2`);
    const gone = new Promise<void>((resolve) => again.on('disconnected', () => resolve()));
    const del = await r0.req('DELETE', `/v1/sessions/${id}`, { token });
    expect(del.body).to.include({ status: 'ended', end_reason: 'released' });
    // r1 owns it: it sees the release within a tick, closes its relay and the browser
    await gone;
    expect(await until(agentFree, 20_000)).to.equal(true);
  });

  /** Another replica process beside r0, sharing its Redis and tenants. */
  const startReplica = async (): Promise<GatewayProcess> => {
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-sessions-r-'));
    await writeFile(path.join(dir, 'keys.json'), JSON.stringify({ tenant_keys: keys }));
    return startGatewayProcess({ ...env(redis.url), SERVICE_DATA_DIR: dir, SERVICE_TENANT_KEYS_PATH: path.join(dir, 'keys.json'), SERVICE_LOG_LEVEL: 'info' });
  };

  it('SIGKILL of the owning replica: the survivor takes the session over; the client it relays stays connected and drives the page; a release ends it and frees the agent', async () => {
    const made = await request(r1.url, 'POST', '/v1/sessions', { token, body: { keep_alive: true, idle_timeout_seconds: 60 } });
    expect(made.status, made.text).to.equal(200);
    const id = made.body.session_id as string;
    const client = await puppeteer.connect({ browserWSEndpoint: `${r0.url.replace('http', 'ws')}/v1/sessions/${id}/cdp`, headers });
    const page = await client.newPage();
    await page.goto(`${site.url}/`);
    let disconnected = false;
    client.on('disconnected', () => (disconnected = true));
    r1.child.kill('SIGKILL');
    await r1.exited;
    // r0 relays the client: it notices the owner's lease expire (6 s) and adopts the session
    expect(await until(async () => r0.logs.some((l) => l.includes('session adopted') && l.includes(id)), 30_000), 'no adoption logged').to.equal(true);
    const s = await get(id);
    expect(s.status).to.equal('live');
    expect(disconnected).to.equal(false);
    await page.goto(`${site.url}/list?page=3`);
    expect(page.url()).to.equal(`${site.url}/list?page=3`);
    // the new owner ends it: the client is disconnected, the browser closes, the slot comes free
    const gone = new Promise<void>((resolve) => client.on('disconnected', () => resolve()));
    const del = await r0.req('DELETE', `/v1/sessions/${id}`, { token });
    expect(del.body).to.include({ status: 'ended', end_reason: 'released' });
    await gone;
    expect(await until(agentFree, 30_000)).to.equal(true);
    expect(await r0.gateway.services.limits.runningCount('acme')).to.equal(0);
  });

  it('SIGKILL of the owning replica while nobody looks (no client, no GET): the survivor\'s sweep ends or adopts the session by itself, and its slot comes free', async () => {
    const owner = await startReplica();
    try {
      const made = await request(owner.url, 'POST', '/v1/sessions', { token, body: { keep_alive: true, idle_timeout_seconds: 5 } });
      expect(made.status, made.text).to.equal(200);
      const id = made.body.session_id as string;
      owner.child.kill('SIGKILL');
      await owner.exited;
      // read straight from the store: a GET would be a look of its own
      const rows = r0.gateway.services.state.store<SessionRecord>('sessions');
      expect((await rows.get(`acme/${id}`))!.status).to.equal('live');
      expect(await until(async () => (await rows.get(`acme/${id}`))!.status === 'ended', 40_000), 'the orphan stayed live').to.equal(true);
      // adopted and then idle past its 5 s, or its agent had reaped it first: ended either way, by the sweep
      expect((await rows.get(`acme/${id}`))!.end_reason).to.be.oneOf(['idle_timeout', 'gateway_lost']);
      expect(await until(agentFree, 30_000)).to.equal(true);
      expect(await r0.gateway.services.limits.runningCount('acme')).to.equal(0);
    } finally {
      await owner.stop().catch(() => undefined);
    }
  });

  it('SIGKILL of the owning replica, and its agent closed the session meanwhile: the next look ends it gateway_lost (nothing to take over); the slot is free', async () => {
    const owner = await startReplica();
    try {
      const made = await request(owner.url, 'POST', '/v1/sessions', { token, body: { keep_alive: true, idle_timeout_seconds: 60 } });
      expect(made.status, made.text).to.equal(200);
      const id = made.body.session_id as string;
      owner.child.kill('SIGKILL');
      await owner.exited;
      // the agent closes the session (as its orphan reaper does when nobody asks about it in time)
      const row = (await r0.gateway.services.state.store<SessionRecord>('sessions').get(`acme/${id}`))!;
      const plane = connectPlane({ url: row.endpoint!.url, secret: SECRET, retries: 0 });
      plane.token = row.endpoint!.token;
      await plane.close();
      plane.disconnect();
      expect(await until(agentFree, 30_000)).to.equal(true);
      // once the dead owner's lease has expired (6 s), a look finds no browser to take over
      expect(await until(async () => (await get(id)).status === 'ended', 20_000)).to.equal(true);
      expect(await get(id)).to.include({ status: 'ended', end_reason: 'gateway_lost' });
      expect(r0.logs.some((l) => l.includes('session adopted') && l.includes(id))).to.equal(false);
      expect(await r0.gateway.services.limits.runningCount('acme')).to.equal(0);
      const next = await r0.req('POST', '/v1/sessions', { token, body: {} });
      expect(next.status, next.text).to.equal(200);
      await r0.req('DELETE', `/v1/sessions/${next.body.session_id}`, { token });
    } finally {
      await owner.stop().catch(() => undefined);
    }
  });
});
