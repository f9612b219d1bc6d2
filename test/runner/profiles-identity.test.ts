// Issue 43, a profile carries its proxy identity: a run or browser session with a
// profile_id that asks proxy_sticky goes out through the provider, exit and sticky
// session its profile saved last time, so the site sees the same place and address;
// naming another geo overrides it (and the new identity is saved); without
// proxy_sticky a run gets a fresh session as before. The upstream is proxy-chain
// (a maintained proxy server) checking the password; real gateway, agent, Chromium.
import { expect } from 'chai';
import { createServer, type Server as HttpServer } from 'node:http';
import { once } from 'node:events';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import puppeteer from 'puppeteer-core';
import { Server as ProxyServer } from 'proxy-chain';
import { RUNNER_ENV, newToken, startGateway, until, type TestGateway } from '../support/gateway.ts';
import { validator, describeError } from '../../schemas/index.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const PASSWORD = 'st1cky-pr0xy-Pa55';

/** The user name's parameters: {country, state, city, session}. */
const params = (username: string): Record<string, string> => {
  const parts = username.split('-');
  const out: Record<string, string> = {};
  for (let i = 2; i + 1 < parts.length; i += 2) out[parts[i]!] = parts[i + 1]!;
  return out;
};
const rowShape = validator('profiles.schema.json');

describe('a profile keeps its proxy identity (proxy_sticky; proxy-chain upstream, real agent and Chromium)', function () {
  this.timeout(300_000);
  let gw: TestGateway;
  let proxy: ProxyServer;
  let site: HttpServer;
  let siteUrl: string;
  const seen: string[] = [];
  const reports: Array<{ tz: string }> = [];
  const token = newToken();

  before(async () => {
    site = createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://site');
      if (u.pathname === '/report') {
        reports.push({ tz: u.searchParams.get('tz') ?? '' });
        res.writeHead(204).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(
        `<!doctype html><title>Where</title><h1>where am I</h1><script>document.cookie='seen=1; max-age=3600';fetch('/report?tz=' + encodeURIComponent(Intl.DateTimeFormat().resolvedOptions().timeZone))</script>`,
      );
    });
    site.listen(0, '127.0.0.1');
    await once(site, 'listening');
    siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    proxy = new ProxyServer({
      port: 0,
      host: '127.0.0.1',
      prepareRequestFunction: ({ username, password, hostname }) => {
        if (password !== PASSWORD) return { requestAuthentication: true, failMsg: 'bad credentials' };
        if (hostname === '127.0.0.1') seen.push(username);
        return {};
      },
    });
    await proxy.listen();
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-identity-'));
    const secrets = path.join(dir, 'secrets');
    await mkdir(secrets);
    await writeFile(path.join(secrets, 'proxy_pw'), PASSWORD + '\n');
    const providersFile = path.join(dir, 'providers.json');
    const upstream = { host: '127.0.0.1', port: proxy.port, password_secret: 'proxy_pw' };
    await writeFile(providersFile, JSON.stringify({ providers: { 'residential-a': { ...upstream, username: { prefix: 'customer-acme' }, default_country: 'us' }, 'residential-b': { ...upstream, username: { prefix: 'other-acme' } } } }));
    gw = await startGateway({
      dir,
      env: { ...RUNNER_ENV, SERVICE_PROXY_PROVIDERS_PATH: providersFile, SERVICE_SECRETS_DIR: secrets, SERVICE_PROXY_PROVIDER: 'residential-a' },
      keys: { [token]: { tenant_id: 'sticky', rate_limit_per_minute: 0, max_concurrent_runs: 2, default_compute_backend: 'dom_plane' } },
    });
  });
  after(async () => {
    await gw?.close();
    await proxy?.close(true);
    site?.closeAllConnections();
    site?.close();
  });

  /** A run on `profile` that opens the page; the proxy user names it went out with, and the profile row its save wrote. */
  async function run(profile: string, runtime: Body): Promise<{ names: string[]; row: Body }> {
    const from = seen.length;
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan: [{ intent: 'open the page', type: 'navigate', url: `${siteUrl}/where` }, { intent: 'let it report', type: 'wait', seconds: 0.5 }], profile_id: profile, detached: false, compute_backend: 'dom_plane', ...runtime } });
    expect(r.status, r.text).to.equal(200);
    expect(r.body.status, JSON.stringify(r.body.steps).slice(0, 400)).to.equal('succeeded');
    return { names: seen.slice(from), row: await savedBy(profile, r.body.run_id as string) };
  }
  async function savedBy(profile: string, holder: string): Promise<Body> {
    let row: Body = {};
    const ok = await until(async () => {
      row = (await gw.req('GET', `/v1/profiles/${profile}`, { token })).body as Body;
      return row.last_run_id === holder;
    }, 30_000);
    expect(ok, `profile saved by ${holder}: ${JSON.stringify(row)}`).to.equal(true);
    expect(rowShape(row), describeError('', rowShape.errors)).to.equal(true);
    return row;
  }
  const sessionsOf = (names: string[]) => [...new Set(names.map((n) => params(n).session))];

  it('saves the exit and sticky session a run used, and a proxy_sticky run on the profile goes out through the same', async () => {
    const first = await run('traveller', { proxy_sticky: true, proxy_state: 'IL', proxy_city: 'Chicago' });
    expect(first.names.length, 'the proxy carried the run').to.be.at.least(1);
    const [s1] = sessionsOf(first.names);
    expect(sessionsOf(first.names)).to.have.length(1);
    expect(first.row.proxy_identity).to.deep.equal({ provider: 'residential-a', country: 'us', state: 'il', city: 'Chicago', session: s1 });

    // no geo named: the saved identity, the same sticky session, and the time zone of its exit
    const reportsFrom = reports.length;
    const second = await run('traveller', { proxy_sticky: true });
    expect(second.names.length).to.be.at.least(1);
    for (const n of second.names) expect(n).to.equal(`customer-acme-country-us-state-il-city-chicago-session-${s1}`);
    expect(reports.slice(reportsFrom).map((x) => x.tz)).to.include('America/Chicago');
    expect(second.row.proxy_identity).to.deep.equal(first.row.proxy_identity);
    // the same geo named again is no override
    const third = await run('traveller', { proxy_sticky: true, proxy_state: 'IL' });
    expect(sessionsOf(third.names)).to.deep.equal([s1]);
  });

  it('a run naming another geo or provider overrides the saved identity, and its own is saved; without proxy_sticky a run gets a fresh session', async () => {
    const before = ((await gw.req('GET', '/v1/profiles/traveller', { token })).body as Body).proxy_identity as Body;
    const moved = await run('traveller', { proxy_sticky: true, proxy_state: 'CA' });
    const [s2] = sessionsOf(moved.names);
    expect(s2).to.not.equal(before.session);
    for (const n of moved.names) expect(params(n)).to.include({ country: 'us', state: 'ca' }).and.not.have.property('city');
    expect(moved.row.proxy_identity).to.deep.equal({ provider: 'residential-a', country: 'us', state: 'ca', session: s2 });

    const other = await run('traveller', { proxy_sticky: true, proxy_provider: 'residential-b' });
    expect(other.names.every((n) => n.startsWith('other-acme-'))).to.equal(true);
    expect(sessionsOf(other.names)[0]).to.not.equal(s2);
    expect((other.row.proxy_identity as Body).provider).to.equal('residential-b');

    // a direct run keeps the identity the site knows
    const direct = await run('traveller', { proxy_disabled: true, proxy_sticky: true });
    expect(direct.names).to.deep.equal([]);
    expect(direct.row.proxy_identity).to.deep.equal(other.row.proxy_identity);

    const fresh = await run('traveller', {});
    expect(sessionsOf(fresh.names)).to.have.length(1);
    expect(sessionsOf(fresh.names)[0]).to.not.equal((other.row.proxy_identity as Body).session);
    expect(fresh.row.proxy_identity).to.include({ provider: 'residential-a', country: 'us', session: sessionsOf(fresh.names)[0] });
  });

  it('a browser session with the profile and proxy_sticky goes out through the saved identity, and saves it back', async () => {
    const saved = ((await gw.req('GET', '/v1/profiles/traveller', { token })).body as Body).proxy_identity as Body;
    const made = await gw.req('POST', '/v1/sessions', { token, body: { compute_backend: 'dom_plane', profile_id: 'traveller', proxy_sticky: true, keep_alive: true } });
    expect(made.status, made.text).to.equal(200);
    const id = made.body.session_id as string;
    const from = seen.length;
    const browser = await puppeteer.connect({ browserWSEndpoint: `${gw.url.replace('http', 'ws')}/v1/sessions/${id}/cdp`, headers: { 'X-Service-Token': token } });
    const page = (await browser.pages())[0] ?? (await browser.newPage());
    await page.goto(`${siteUrl}/where`);
    await browser.disconnect();
    expect((await gw.req('DELETE', `/v1/sessions/${id}`, { token })).status).to.equal(200);
    expect(seen.length).to.be.greaterThan(from);
    for (const n of seen.slice(from)) expect(n).to.equal(`customer-acme-country-us-session-${saved.session}`);
    expect((await savedBy('traveller', id)).proxy_identity).to.deep.equal(saved);
  });
});
