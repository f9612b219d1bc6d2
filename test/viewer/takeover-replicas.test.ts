// Issue 42 across replicas: the run asks for a person on one replica (r0, in this
// process, its runner); its one-time link is opened on another (r1, its own process,
// runner off) that shares Redis and the store of record. r1 serves the link's page and
// claim, relays the live screen and the person's input to the run's plane (a registered
// dom agent of the fleet), and takes Done; the owner sees the answer and the run
// finishes its plan. Real Redis (and PostgreSQL with --store postgres), agent, Chromium.
import { expect } from 'chai';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser } from 'puppeteer-core';
import { newToken, request, startGateway, until, type TestGateway } from '../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { startRedis, type RedisHandle } from '../support/redis.ts';
import { startPostgres, type PgHandle } from '../support/postgres.ts';
import { TEST_STORE } from '../support/store.ts';
import { startTakeoverSite, type TakeoverSite } from '../support/takeover-site.ts';
import { launchTestBrowser } from '../support/browser.ts';
import { liveScreen, signInPlan } from '../support/live-screen.ts';
import { startAgentProcess, type AgentProc } from '../planes/support.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const SECRET = 'takeover-agent-secret-0123456789abcd';

describe('a takeover link served by another replica (shared Redis and store, a registered dom agent, real Chromium)', function () {
  this.timeout(300_000);
  let redis: RedisHandle;
  let pg: PgHandle | undefined;
  let site: TakeoverSite;
  let r0: TestGateway;
  let r1: GatewayProcess;
  let agent: AgentProc;
  let browser: Browser;
  const token = newToken();
  const operator = newToken();
  const login = { username: 'dave@example.com', password: `pw-${randomBytes(9).toString('base64url')}` };
  const keys = { [token]: { tenant_id: 'acme', rate_limit_per_minute: 0, default_compute_backend: 'dom_plane' }, [operator]: { tenant_id: 'ops', scopes: ['operator'] } };
  const env = (): Record<string, string> => ({
    SERVICE_REDIS_URL: redis.url,
    ...(pg ? { SERVICE_DATABASE_URL: pg.url } : {}),
    SERVICE_PLANES: 'fleet',
    SERVICE_PLANE_SECRET: SECRET,
    SERVICE_ALLOW_PRIVATE_NETWORKS: '1',
    SERVICE_TAKEOVER_SECONDS: '120',
  });

  before(async () => {
    [redis, site] = await Promise.all([startRedis(), startTakeoverSite(login)]);
    if (TEST_STORE === 'postgres') pg = await startPostgres();
    r0 = await startGateway({ env: { ...env(), SERVICE_RUNNER: 'on' }, keys });
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-takeover-r1-'));
    await writeFile(path.join(dir, 'keys.json'), JSON.stringify({ tenant_keys: keys }));
    r1 = await startGatewayProcess({ ...env(), SERVICE_RUNNER: 'off', SERVICE_DATA_DIR: dir, SERVICE_TENANT_KEYS_PATH: path.join(dir, 'keys.json'), SERVICE_LOG_LEVEL: 'info' });
    agent = await startAgentProcess('dom', { PLANE_AGENT_SECRET: SECRET, PLANE_REGISTER_URL: r0.url, PLANE_HEARTBEAT_SECONDS: '1', PLANE_AGENT_ID: 'a7e0e0000042' });
    expect(await until(async () => ((await r0.req('GET', '/v1/planes', { token: operator })).body.agents as Body[]).length === 1, 30_000), 'the agent registered').to.equal(true);
    browser = await launchTestBrowser();
  });
  after(async () => {
    await browser?.close();
    await r1?.stop().catch(() => undefined);
    await r0?.close().catch(() => undefined);
    await agent?.stop();
    await Promise.all([redis?.stop(), site?.close(), pg?.stop()]);
  });

  it("r1 serves the link, relays the person's clicks and keys to the plane the run on r0 holds, and takes Done; the run finishes on r0", async () => {
    const plan = signInPlan(site.url, login, { intent: 'type the code from your phone', type: 'request_human', params: { message: 'Type the code from your phone and press Enter, then Done' } });
    const r = await r0.req('POST', '/v1/predict', { token, body: { plan, detached: true } });
    expect(r.status, r.text).to.equal(200);
    const id = r.body.run_id as string;
    let ask: Body | undefined;
    const asked = async (): Promise<boolean> => !!(ask = ((await request(r1.url, 'GET', `/v1/runs/${id}/events`, { token })).body.events as Body[]).find((e) => e.type === 'takeover_requested')?.data as Body | undefined);
    expect(await until(asked, 90_000), 'takeover_requested (read through r1)').to.equal(true);

    // the link names r0 (the replica that made it); the person's browser reaches r1 instead, as behind a balancer
    const link = new URL(ask!.link as string);
    expect(link.origin).to.equal(new URL(r0.url).origin);
    const tab = await browser.newPage();
    await tab.setViewport({ width: 1400, height: 1000 });
    await tab.goto(`${r1.url}${link.pathname}${link.hash}`);
    const at = await liveScreen(tab);
    await tab.mouse.click(...at(190, 140));
    await tab.keyboard.type(site.code);
    await tab.keyboard.press('Enter');
    expect(await until(async () => site.received.some((x) => x.path === '/code' && x.body.code === site.code), 30_000), "the run's page got the code through r1").to.equal(true);
    await tab.click('#takeover-done');
    await tab.waitForSelector('#takeover-title');
    expect(await tab.$eval('#takeover-title', (e) => e.textContent)).to.equal('Thank you: the run goes on');
    await tab.close();

    let run: Body = {};
    expect(await until(async () => ['succeeded', 'failed', 'cancelled'].includes((run = (await r0.req('GET', `/v1/runs/${id}`, { token })).body).status), 90_000), 'run ended').to.equal(true);
    expect(run.status, JSON.stringify(run.failure_help)).to.equal('succeeded');
    expect(JSON.stringify((await r0.req('GET', `/v1/runs/${id}/artifacts/extracted_rows.json`, { token })).body)).to.include('Welcome, signed in');
    // the relay ran on r1, not on the run's owner; the inputs it saw are the run's record
    const r1Logs = r1.stdout() + r1.stderr();
    expect(r1Logs.split('\n').some((l) => l.includes('live screen opened') && l.includes(ask!.takeover_id as string))).to.equal(true);
    expect(r0.logs.some((l) => l.includes('live screen opened'))).to.equal(false);
    const end = ((await r0.req('GET', `/v1/runs/${id}/events`, { token })).body.events as Body[]).find((e) => e.type === 'takeover_ended')!;
    expect(end.data).to.include({ outcome: 'done', by: 'link' });
    expect(end.data.inputs.typed_characters).to.equal(site.code.length);
    expect(r1Logs + r0.logs.join('\n')).to.not.include(site.code);
  });
});
