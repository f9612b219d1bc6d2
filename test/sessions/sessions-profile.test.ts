// Issue 43, a browser session with a profile_id saves its profile when it ends, on
// every ending: a DELETE, the idle timeout, the maximum duration. The DELETE answers
// once the session's row says ended, without waiting for the save (here the bucket
// holds the save's upload until the test lets it go), and the profile's lock is held
// until the new version is stored: a session asking for the profile meanwhile waits
// for it and starts signed in. Real gateway, local agent, Chromium; the bucket is a
// protocol-faithful local S3.
import { expect } from 'chai';
import puppeteer from 'puppeteer-core';
import { RUNNER_ENV, newToken, sleep, startGateway, until, type TestGateway } from '../support/gateway.ts';
import { startFakeS3, type FakeS3 } from '../support/s3.ts';
import { startProfileSite, type ProfileSite } from '../support/profile-site.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('a browser session saves its profile when it ends (local agent, real Chromium, S3 bucket)', function () {
  this.timeout(300_000);
  let gw: TestGateway;
  let s3: FakeS3;
  let site: ProfileSite;
  const token = newToken();
  const headers = { 'X-Service-Token': token };
  /** the uploads of profile `held` wait for `letGo` */
  let held = '';
  let letGo: () => void = () => undefined;
  let gate = Promise.resolve();

  before(async () => {
    [s3, site] = await Promise.all([startFakeS3('AKIDSESSIONS', { hold: (method, key) => (method === 'PUT' && held !== '' && key.includes(`/${held}/`) ? gate : undefined) }), startProfileSite()]);
    gw = await startGateway({
      env: { ...RUNNER_ENV, SERVICE_PROFILE_S3_ENDPOINT: s3.url, SERVICE_PROFILE_S3_BUCKET: 'profiles', SERVICE_PROFILE_S3_ACCESS_KEY_ID: 'AKIDSESSIONS', SERVICE_PROFILE_S3_SECRET_ACCESS_KEY: 'sessions-secret' },
      keys: { [token]: { tenant_id: 'desk', rate_limit_per_minute: 0, max_concurrent_runs: 3, default_compute_backend: 'dom_plane' } },
    });
  });
  after(async () => {
    letGo();
    await gw?.close();
    await s3?.close();
    await site?.close();
  });

  async function open(profile: string, extra: Body = {}): Promise<string> {
    const made = await gw.req('POST', '/v1/sessions', { token, body: { compute_backend: 'dom_plane', profile_id: profile, keep_alive: true, ...extra } });
    expect(made.status, made.text).to.equal(200);
    return made.body.session_id as string;
  }
  /** Connects to the session, opens `page` of the fixture site, waits for its writes (or report), disconnects. */
  async function visit(id: string, page: 'login' | 'whoami'): Promise<void> {
    const browser = await puppeteer.connect({ browserWSEndpoint: `${gw.url.replace('http', 'ws')}/v1/sessions/${id}/cdp`, headers });
    try {
      const tab = (await browser.pages())[0] ?? (await browser.newPage());
      const [stored, seen] = [site.stored.length, site.seen.length];
      await tab.goto(`${site.url}/${page}`);
      const landed = await until(async () => (page === 'login' ? site.stored.length > stored : site.seen.length > seen), 20_000);
      expect(landed, `${page} reported`).to.equal(true);
    } finally {
      await browser.disconnect();
    }
  }
  async function savedBy(profile: string, holder: string): Promise<Body> {
    let row: Body = {};
    const ok = await until(async () => {
      row = (await gw.req('GET', `/v1/profiles/${profile}`, { token })).body as Body;
      return row.last_run_id === holder;
    }, 60_000);
    expect(ok, `profile ${profile} saved by ${holder}: ${JSON.stringify(row)}`).to.equal(true);
    return row;
  }
  async function endedWith(id: string, reason: string): Promise<void> {
    let row: Body = {};
    const ok = await until(async () => {
      row = (await gw.req('GET', `/v1/sessions/${id}`, { token })).body as Body;
      return row.status === 'ended';
    }, 60_000);
    expect(ok, JSON.stringify(row)).to.equal(true);
    expect(row.end_reason).to.equal(reason);
  }

  it('a DELETE answers before the save; the next session on the profile waits for the save and starts signed in', async () => {
    const first = await open('counter');
    await visit(first, 'login');
    const sid = site.logins.at(-1)!.sid;
    held = 'counter';
    gate = new Promise<void>((r) => (letGo = r));
    // the bucket stalls the save's upload: the answer cannot have waited for the save
    const del = await gw.req('DELETE', `/v1/sessions/${first}`, { token });
    expect(del.status, del.text).to.equal(200);
    expect(del.body).to.include({ status: 'ended', end_reason: 'released' });
    // the save is under way (its upload waits in the bucket) and nothing is stored yet
    expect(await until(async () => s3.requests.some((r) => r.startsWith('PUT ') && r.includes('/counter/')), 30_000), 'the save reached the bucket').to.equal(true);
    expect((await gw.req('GET', '/v1/profiles/counter', { token })).status).to.equal(404);
    // a session asking for the profile now waits for the lock the save holds
    const next = gw.req('POST', '/v1/sessions', { token, body: { compute_backend: 'dom_plane', profile_id: 'counter', keep_alive: true } });
    let answered = false;
    void next.then(() => (answered = true));
    await sleep(1000);
    expect(answered, 'the next session waited for the save').to.equal(false);
    letGo();
    const made = await next;
    expect(made.status, made.text).to.equal(200);
    const second = made.body.session_id as string;
    const row = await savedBy('counter', first);
    expect(row.bytes).to.be.greaterThan(0);
    await visit(second, 'whoami');
    expect(site.seen.at(-1)).to.deep.equal({ cookie: sid, ls: `L-${sid}`, idb: `I-${sid}` });
    held = '';
    expect((await gw.req('DELETE', `/v1/sessions/${second}`, { token })).status).to.equal(200);
    await savedBy('counter', second);
  });

  it('saves the profile when the session ends on its idle timeout', async () => {
    const id = await open('idler', { idle_timeout_seconds: 5 });
    await visit(id, 'login');
    const sid = site.logins.at(-1)!.sid;
    await endedWith(id, 'idle_timeout');
    await savedBy('idler', id);
    const again = await open('idler');
    await visit(again, 'whoami');
    expect(site.seen.at(-1)).to.deep.equal({ cookie: sid, ls: `L-${sid}`, idb: `I-${sid}` });
    expect((await gw.req('DELETE', `/v1/sessions/${again}`, { token })).status).to.equal(200);
  });

  it('saves the profile when the session reaches its maximum duration', async () => {
    const id = await open('sprinter', { timeout_seconds: 10 });
    await visit(id, 'login');
    await endedWith(id, 'max_duration');
    const row = await savedBy('sprinter', id);
    expect(row.files).to.be.greaterThan(0);
  });
});
