// Issue 43: a gateway SIGKILLed during a profile save. A save writes the new version's
// blob whole, then points the index at it, then drops the old blob; the gateway is
// killed after the blob is written (the index not yet moved), and again after the index
// moved (the old blob not yet dropped, the lock not yet released). After each restart
// the profile is one whole version, old or new, never a mix (the next run sees one
// sign-in's cookie, localStorage and IndexedDB together), and its lock is free at once:
// the next run on the profile is accepted and runs, not refused profile_busy while the
// dead saver's mark lives. A gateway, agent and browser killed mid-run leave the
// browser's changes in the agent's profile dir: the next run starts from the stored
// version, not from them.
// Real gateway processes, local agents, Chromium.
import { expect } from 'chai';
import { mkdtemp, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newToken, request, until } from '../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { startProfileSite, type ProfileSite } from '../support/profile-site.ts';
import { descendants, stillPresent } from '../planes/support.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const PROFILE = 'survivor';

describe('a gateway SIGKILLed during a profile save (gateway processes, local agents, real Chromium)', function () {
  this.timeout(300_000);
  const token = newToken();
  let site: ProfileSite;
  let dir: string;
  let gw: GatewayProcess | undefined;

  before(async () => {
    site = await startProfileSite();
    dir = await mkdtemp(path.join(tmpdir(), 'runplane-profiles-kill-'));
    await writeFile(path.join(dir, 'keys.json'), JSON.stringify({ tenant_keys: { [token]: { tenant_id: 'keeper', rate_limit_per_minute: 0, max_concurrent_runs: 2, default_compute_backend: 'dom_plane' } } }));
  });
  after(async () => {
    await gw?.stop();
    await site?.close();
  });

  /** A gateway process on the test's data dir; `pause` holds each profile save at that point (the test kills it there). */
  const start = (pause?: 'blob' | 'index') =>
    startGatewayProcess({
      SERVICE_DATA_DIR: dir,
      SERVICE_TENANT_KEYS_PATH: path.join(dir, 'keys.json'),
      SERVICE_RUNNER: 'on',
      SERVICE_PLANES: 'local',
      SERVICE_ALLOW_PRIVATE_NETWORKS: '1',
      SERVICE_LOG_LEVEL: 'warn',
      ...(pause ? { RUNPLANE_TEST_PROFILE_SAVE_PAUSE: pause, RUNPLANE_TEST_PROFILE_SAVE_PAUSE_MS: '120000' } : {}),
    });
  const req = (method: string, p: string, body?: unknown) => request(gw!.url, method, p, { token, body });
  const blobs = async (): Promise<string[]> => (await readdir(path.join(dir, 'profiles-store', 'keeper', PROFILE)).catch(() => [] as string[])).filter((n) => n.endsWith('.rps')).sort();
  const row = async (): Promise<Body> => (await req('GET', `/v1/profiles/${PROFILE}`)).body as Body;

  /** A run on the profile: it reports who it is (whoami), then signs in again (login) when `login`. */
  async function run(steps: Array<'whoami' | 'login'>): Promise<string> {
    const plan = steps.flatMap((p) => [
      { intent: p, type: 'navigate', url: `${site.url}/${p}`, required: true },
      { intent: 'let the page finish', type: 'wait', seconds: 1.5 },
    ]);
    const r = await req('POST', '/v1/predict', { plan, profile_id: PROFILE, detached: false, compute_backend: 'dom_plane' });
    expect(r.status, r.text).to.equal(200);
    expect(r.body.status, JSON.stringify(r.body.steps).slice(0, 400)).to.equal('succeeded');
    return r.body.run_id as string;
  }
  /** SIGKILLs the gateway (and with `agents`, its agents and browsers at once: no orderly close of theirs packs anything). */
  async function kill(agents = false): Promise<void> {
    const spawned = descendants(gw!.child.pid!);
    gw!.child.kill('SIGKILL');
    if (agents) {
      for (const pid of spawned) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone already
        }
      }
    }
    await gw!.exited;
    gw = undefined;
    expect(await until(async () => stillPresent(spawned).length === 0, 15_000), 'the killed gateway left its agents running').to.equal(true);
  }
  const signedInAs = (sid: string) => ({ cookie: sid, ls: `L-${sid}`, idb: `I-${sid}` });

  it('killed after the new blob is written: the old version stays whole and the profile is free at once; killed after the index moved: the new version is whole and free', async () => {
    gw = await start();
    const first = await run(['login']);
    const sidA = site.logins.at(-1)!.sid;
    expect(await until(async () => (await row()).last_run_id === first, 30_000), 'the first version saved').to.equal(true);
    const versionA = (await row()).version as string;
    await gw.stop();

    // 1. the save of a second sign-in is held after its blob is written: kill there
    gw = await start('blob');
    const second = await run(['login']);
    expect(await until(async () => (await blobs()).length === 2, 30_000), 'the new blob is written').to.equal(true);
    expect((await row()).version, 'the index has not moved').to.equal(versionA);
    await kill();

    // restart: the old version, whole; the next run is accepted at once and starts signed in as before
    gw = await start('index');
    const after1 = await row();
    expect(after1).to.include({ version: versionA, last_run_id: first });
    expect(second).to.not.equal(first);
    const third = await run(['whoami', 'login']);
    expect(site.seen.at(-1)).to.deep.equal(signedInAs(sidA));
    const sidC = site.logins.at(-1)!.sid;

    // 2. that run's save is held after the index names its version: kill there
    expect(await until(async () => (await row()).last_run_id === third, 30_000), 'the index names the new version').to.equal(true);
    const versionC = (await row()).version as string;
    expect(await blobs()).to.include(`${versionA}.rps`);
    await kill();

    // restart: the new version, whole; the lock the dead save held is free
    gw = await start();
    expect(await row()).to.include({ version: versionC, last_run_id: third });
    expect(await blobs()).to.include(`${versionC}.rps`);
    const fourth = await run(['whoami']);
    expect(site.seen.at(-1)).to.deep.equal(signedInAs(sidC));
    expect(await until(async () => (await row()).last_run_id === fourth, 30_000), 'the next save goes through').to.equal(true);
  });

  it('gateway, agent and browser killed mid-run, after the page signed in again: the next run starts from the stored version, not from what the killed browser left on the agent', async () => {
    gw ??= await start();
    const stored = await row();
    const sid = (site.seen.at(-1) as { cookie: string }).cookie;
    const plan = [
      { intent: 'login', type: 'navigate', url: `${site.url}/login`, required: true },
      { intent: 'linger', type: 'wait', seconds: 60 },
    ];
    const [logins, writes] = [site.logins.length, site.stored.length];
    const r = await req('POST', '/v1/predict', { plan, profile_id: PROFILE, detached: true, compute_backend: 'dom_plane' });
    expect(r.status, r.text).to.equal(200);
    // the browser wrote the new sign-in into its profile dir on the agent
    expect(await until(async () => site.logins.length > logins && site.stored.length > writes, 60_000), 'the page signed in').to.equal(true);
    await kill(true);

    gw = await start();
    // recovery ends the killed run (runner_lost) and frees its lock; the stored version is the one before it
    expect(await until(async () => (await req('GET', `/v1/runs/${r.body.run_id}`)).body.status === 'failed', 30_000), 'the killed run is ended').to.equal(true);
    expect(await row()).to.include({ version: stored.version });
    await run(['whoami']);
    expect(site.seen.at(-1)).to.deep.equal(signedInAs(sid));
  });
});
