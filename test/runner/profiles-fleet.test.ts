// Issue 43: a profile follows the tenant across the fleet. Two replicas on one Redis
// share an S3-compatible bucket for the profiles' blobs and one operator key; four
// agents register (dom_plane and computer_plane, each on host a and host b). A run
// through replica 1 signs in on host a's agent; then a browser session owned by
// replica 0, placed on host b's agent, starts signed in: the HttpOnly cookie, the
// localStorage value and the IndexedDB record are all there. Real Redis, agents,
// Chromium, Xvfb and xdotool; the bucket is a protocol-faithful local S3.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { RUNNER_ENV, newToken, request, startGateway, until, type TestGateway } from '../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { startRedis, type RedisHandle } from '../support/redis.ts';
import { startFakeS3, type FakeS3 } from '../support/s3.ts';
import { startProfileSite, type ProfileSite } from '../support/profile-site.ts';
import { startAgentProcess, type AgentProc } from '../planes/support.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const SECRET = 'profiles-agent-secret-0123456789abcd';
const IDS = { domA: 'd0a000000001', domB: 'd0b000000002', compA: 'c0a000000003', compB: 'c0b000000004' };

describe('a profile follows the tenant across agents and replicas (Redis, S3, registered agents)', function () {
  this.timeout(420_000);
  let redis: RedisHandle;
  let s3: FakeS3;
  let site: ProfileSite;
  let r0: TestGateway;
  let r1: GatewayProcess;
  const agents: Record<string, AgentProc> = {};
  const token = newToken();
  const operator = newToken();
  const keys = { [token]: { tenant_id: 'roamer', rate_limit_per_minute: 0, max_concurrent_runs: 6 }, [operator]: { tenant_id: 'ops', scopes: ['operator'] } };
  const headers = { 'X-Service-Token': token };

  before(async () => {
    [redis, s3, site] = await Promise.all([startRedis(), startFakeS3('AKIDPROFILES'), startProfileSite()]);
    const shared = await mkdtemp(path.join(tmpdir(), 'runplane-profiles-fleet-'));
    const keyFile = path.join(shared, 'operator.key');
    await writeFile(keyFile, randomBytes(32).toString('hex'), { mode: 0o600 });
    const env = {
      ...RUNNER_ENV,
      SERVICE_REDIS_URL: redis.url,
      SERVICE_PLANES: 'fleet',
      SERVICE_PLANE_SECRET: SECRET,
      SERVICE_PLANE_WAIT_SECONDS: '120',
      SERVICE_RUN_LEASE_SECONDS: '6',
      SERVICE_VAULT_KEY_FILE: keyFile,
      SERVICE_PROFILE_S3_ENDPOINT: s3.url,
      SERVICE_PROFILE_S3_BUCKET: 'profiles',
      SERVICE_PROFILE_S3_ACCESS_KEY_ID: 'AKIDPROFILES',
      SERVICE_PROFILE_S3_SECRET_ACCESS_KEY: 'not-checked-by-the-fake',
    };
    // replica 0 (this process) runs no runs: every run executes on replica 1, every session here
    r0 = await startGateway({ env: { ...env, SERVICE_RUNNER: 'off' }, keys });
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-profiles-r1-'));
    await writeFile(path.join(dir, 'keys.json'), JSON.stringify({ tenant_keys: keys }));
    r1 = await startGatewayProcess({ ...env, SERVICE_DATA_DIR: dir, SERVICE_TENANT_KEYS_PATH: path.join(dir, 'keys.json'), SERVICE_LOG_LEVEL: 'info' });
    const agentEnv = (id: string, host: string) => ({ PLANE_AGENT_SECRET: SECRET, PLANE_REGISTER_URL: r0.url, PLANE_HEARTBEAT_SECONDS: '1', PLANE_SESSION_ORPHAN_SECONDS: '10', PLANE_AGENT_ID: id, PLANE_LABELS: `host=${host}` });
    [agents.domA, agents.domB, agents.compA, agents.compB] = await Promise.all([
      startAgentProcess('dom', agentEnv(IDS.domA, 'a')),
      startAgentProcess('dom', agentEnv(IDS.domB, 'b')),
      startAgentProcess('computer', agentEnv(IDS.compA, 'a')),
      startAgentProcess('computer', agentEnv(IDS.compB, 'b')),
    ]);
    const listed = async () => ((await r0.req('GET', '/v1/planes', { token: operator })).body.agents as Body[]).filter((a) => a.state === 'free').length === 4;
    expect(await until(listed, 60_000), 'four agents registered').to.equal(true);
  });
  after(async () => {
    await r1?.stop().catch(() => undefined);
    await r0?.close().catch(() => undefined);
    for (const a of Object.values(agents)) await a.stop();
    await Promise.all([redis?.stop(), s3?.close(), site?.close()]);
  });

  const logs = () => `${r0.logs.join('\n')}\n${r1.stdout()}\n${r1.stderr()}`;
  /** the agent each run or session was placed on, from the replicas' logs */
  const placedOn = (id: string): string | undefined => {
    for (const l of logs().split('\n')) {
      if (!l.includes('run placed on a plane agent') || !l.includes(id)) continue;
      const j = JSON.parse(l.slice(l.indexOf('{'))) as Body;
      if (j.run_id === id) return j.agent as string;
    }
    return undefined;
  };

  /** A run through replica 1, on host a's agent of `backend`, that signs in with profile `profile`. */
  async function signInOnHostA(profile: string, backend: string): Promise<string> {
    const plan = {
      steps: [
        { intent: 'sign in', type: 'navigate', url: `${site.url}/login`, required: true },
        { intent: 'let the writes land', type: 'wait', seconds: 2 },
      ],
    };
    const r = await request(r1.url, 'POST', '/v1/predict', { token, body: { plan, profile_id: profile, compute_backend: backend, plane_labels: { host: 'a' }, detached: false } });
    expect(r.status, r.text).to.equal(200);
    expect(r.body.status, JSON.stringify(r.body.steps)).to.equal('succeeded');
    const runId = r.body.run_id as string;
    // the save follows the run's end; the index (in Redis, the store of record here) names the run once it is in the bucket
    expect(await until(async () => (await r0.req('GET', `/v1/profiles/${profile}`, { token })).body.last_run_id === runId, 30_000), 'profile saved').to.equal(true);
    return runId;
  }

  /** A session owned by replica 0 on host b's agent with `profile`: what /whoami sees there. */
  async function whoamiOnHostB(profile: string, backend: string): Promise<{ id: string; page: Body }> {
    const made = await r0.req('POST', '/v1/sessions', { token, body: { compute_backend: backend, profile_id: profile, plane_labels: { host: 'b' }, keep_alive: true, idle_timeout_seconds: 60 } });
    // on failure, what the replicas said about placing it (a refusal, an agent that never came free)
    const why = () => logs().split('\n').filter((l) => /refused|plane agent|unavailable|waited/.test(l)).slice(-15).join('\n');
    expect(made.status, `${made.text}\n${why()}`).to.equal(200);
    const id = made.body.session_id as string;
    const browser = await puppeteer.connect({ browserWSEndpoint: `${r0.url.replace('http', 'ws')}/v1/sessions/${id}/cdp`, headers });
    const reports = site.seen.length;
    const page = (await browser.pages())[0] ?? (await browser.newPage());
    await page.goto(`${site.url}/whoami`);
    await page.waitForFunction("document.getElementById('state')?.textContent === 'checked'", { timeout: 20_000 });
    const direct = (await page.evaluate("({ ls: localStorage.getItem('ls'), cookieVisible: document.cookie.includes('sid=') })")) as Body;
    await browser.disconnect();
    const del = await r0.req('DELETE', `/v1/sessions/${id}`, { token });
    expect(del.status, del.text).to.equal(200);
    // the DELETE answers before the save; the session's version is indexed once stored
    expect(await until(async () => (await r0.req('GET', `/v1/profiles/${profile}`, { token })).body.last_run_id === id, 30_000), 'session profile saved').to.equal(true);
    expect(site.seen.length).to.be.greaterThan(reports);
    return { id, page: { ...site.seen.at(-1)!, direct } };
  }

  for (const backend of ['dom_plane', 'computer_plane'] as const) {
    it(`${backend}: signed in on host a through replica 1, a session on host b through replica 0 starts signed in`, async () => {
      const profile = `roam-${backend}`;
      const runId = await signInOnHostA(profile, backend);
      const sid = site.logins.at(-1)!.sid;
      const { id, page } = await whoamiOnHostB(profile, backend);
      expect(page).to.deep.equal({ cookie: sid, ls: `L-${sid}`, idb: `I-${sid}`, direct: { ls: `L-${sid}`, cookieVisible: false } });
      // two agents, two replicas: the run executed on replica 1 (replica 0 runs none), the session is replica 0's
      const [runAgent, sessionAgent] = [placedOn(runId), placedOn(id)];
      const ids = backend === 'dom_plane' ? [IDS.domA, IDS.domB] : [IDS.compA, IDS.compB];
      expect(runAgent).to.equal(ids[0]);
      expect(sessionAgent).to.equal(ids[1]);
      expect(r1.stdout()).to.include(runId);
      // the bucket holds the profile sealed: none of the three values is in it in the clear, nor the key
      const blobs = [...s3.objects.entries()].filter(([k]) => k.startsWith(`profiles/profiles/roamer/${profile}/`));
      expect(blobs.length).to.be.greaterThan(0);
      for (const [, b] of blobs) {
        expect(b.subarray(0, 4).toString()).to.equal('RPS1');
        for (const secret of [sid, `L-${sid}`, `I-${sid}`]) expect(b.includes(secret)).to.equal(false);
      }
    });
  }

  it('the session saved its own version at release (the newest is what the next holder gets); old versions are dropped', async () => {
    const row = (await r0.req('GET', '/v1/profiles/roam-dom_plane', { token })).body as Body;
    expect(row.last_run_id).to.match(/^ses_/);
    const versions = [...s3.objects.keys()].filter((k) => k.startsWith('profiles/profiles/roamer/roam-dom_plane/'));
    expect(versions).to.deep.equal([`profiles/profiles/roamer/roam-dom_plane/${row.version}.rps`]);
  });
});
