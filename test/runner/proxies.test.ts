// Issue 16, proxies: a run goes out through the upstream proxy of its provider
// (SERVICE_PROXY_PROVIDERS_PATH), behind the agent's egress guard, with its
// exit (state, city) and a sticky session id joined into the proxy user name;
// the session id is stable within a run and differs between runs; the browser's
// time zone and locale follow the exit; proxy_disabled connects directly; a
// proxy that refuses is a proxy_error (http_5xx) retried on a new sticky
// session. The upstream is proxy-chain (a maintained proxy server), not ours.
// Real gateway, agents, Chromium (and Xvfb, xdotool) on both planes.
import { expect } from 'chai';
import { createServer, type Server as HttpServer } from 'node:http';
import { once } from 'node:events';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { Server as ProxyServer } from 'proxy-chain';
import { RUNNER_ENV, newToken, startGateway, type TestGateway } from '../support/gateway.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const PASSWORD = 'pr0xy-s3cret-Pa55word';

interface Seen {
  username: string;
  hostname: string;
}

/** The user name's parameters: {country, state, city, session}. */
const params = (username: string): Record<string, string> => {
  const parts = username.split('-');
  const out: Record<string, string> = {};
  for (let i = 2; i + 1 < parts.length; i += 2) out[parts[i]!] = parts[i + 1]!;
  return out;
};

for (const plane of ['dom_plane', 'computer_plane'] as const) {
  describe(`residential proxies (${plane}, proxy-chain upstream, real agent and Chromium)`, function () {
    this.timeout(300_000);
    let gw: TestGateway;
    let proxy: ProxyServer;
    let site: HttpServer;
    let siteUrl: string;
    const seen: Seen[] = [];
    /** flaky provider: the first session id it meets is refused, later ones pass */
    const refusedOnce = new Set<string>();
    const reports: Array<{ tz: string; lang: string; via: string }> = [];
    const token = newToken();

    before(async () => {
      // the site: a page that reports the browser's time zone and language back
      site = createServer((req, res) => {
        const u = new URL(req.url ?? '/', 'http://site');
        if (u.pathname === '/report') {
          reports.push({ tz: u.searchParams.get('tz') ?? '', lang: u.searchParams.get('lang') ?? '', via: String(req.headers['x-via'] ?? 'direct') });
          res.writeHead(204).end();
          return;
        }
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(
          `<!doctype html><title>Where</title><h1>where am I</h1><script>fetch('/report?tz=' + encodeURIComponent(Intl.DateTimeFormat().resolvedOptions().timeZone) + '&lang=' + encodeURIComponent(navigator.language))</script>`,
        );
      });
      site.listen(0, '127.0.0.1');
      await once(site, 'listening');
      siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;

      proxy = new ProxyServer({
        port: 0,
        host: '127.0.0.1',
        prepareRequestFunction: ({ username, password, hostname }) => {
          seen.push({ username, hostname });
          if (password !== PASSWORD) return { requestAuthentication: true, failMsg: 'bad credentials' };
          const session = params(username).session ?? '';
          if (username.startsWith('flaky-') && refusedOnce.size === 0) {
            refusedOnce.add(session);
            return { requestAuthentication: true, failMsg: 'session refused' };
          }
          if (refusedOnce.has(session)) return { requestAuthentication: true, failMsg: 'session refused' };
          return {};
        },
      });
      await proxy.listen();

      const dir = await mkdtemp(path.join(tmpdir(), 'runplane-proxies-'));
      const secrets = path.join(dir, 'secrets');
      await mkdir(secrets);
      await writeFile(path.join(secrets, 'proxy_good'), PASSWORD + '\n');
      await writeFile(path.join(secrets, 'proxy_bad'), 'not-the-password\n');
      const upstream = { host: '127.0.0.1', port: proxy.port };
      const providersFile = path.join(dir, 'providers.json');
      await writeFile(providersFile, JSON.stringify({
        providers: {
          'residential-a': { ...upstream, username: { prefix: 'customer-acme' }, password_secret: 'proxy_good', default_country: 'us' },
          'residential-b': { ...upstream, username: { prefix: 'flaky-acme' }, password_secret: 'proxy_good' },
          'residential-c': { ...upstream, username: { prefix: 'refused-acme' }, password_secret: 'proxy_bad' },
        },
      }));
      gw = await startGateway({
        env: { ...RUNNER_ENV, SERVICE_PROXY_PROVIDERS_PATH: providersFile, SERVICE_SECRETS_DIR: secrets, SERVICE_PROXY_PROVIDER: 'residential-a' },
        keys: { [token]: { tenant_id: 'geo', rate_limit_per_minute: 0, max_concurrent_runs: 2, default_compute_backend: plane } },
      });
    });
    after(async () => {
      await gw?.close();
      await proxy?.close(true);
      site?.closeAllConnections();
      site?.close();
    });

    async function run(plan: unknown, runtime: Body = {}): Promise<{ run: Body; life: Body; events: Body[] }> {
      const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: false, compute_backend: plane, ...runtime } });
      expect(r.status, r.text).to.equal(200);
      const life = (await gw.req('GET', `/v1/runs/${r.body.run_id}`, { token })).body;
      const events = (await gw.req('GET', `/v1/runs/${r.body.run_id}/events`, { token })).body.events as Body[];
      return { run: r.body, life, events };
    }
    const open = (intent: string, q = '') => ({ intent, type: 'navigate', url: `${siteUrl}/where${q}` });
    // sessions of requests to the site: a browser's own background requests may come late from an earlier session
    const sessionsSince = (from: number, site = true) => new Set(seen.slice(from).filter((s) => !site || s.hostname === '127.0.0.1').map((s) => params(s.username).session));

    it('goes out through the provider with the run\'s state and city, one sticky session per run, and a time zone that matches the exit', async () => {
      const from = seen.length;
      const reportsFrom = reports.length;
      const { run: r } = await run([open('open the page'), open('open it again', '?again=1')], { proxy_state: 'IL', proxy_city: 'Chicago' });
      expect(r.status, JSON.stringify(r.steps).slice(0, 500)).to.equal('succeeded');
      // (the browser's own background requests go out the same way, on the same session)
      const mine = seen.slice(from);
      expect(mine.filter((s) => s.hostname === '127.0.0.1').length, 'the proxy carried the run to the site').to.be.at.least(2);
      for (const s of mine) expect(s.username).to.match(/^customer-acme-country-us-state-il-city-chicago-session-[0-9a-f]{16}$/);
      expect(sessionsSince(from).size, 'one sticky session within the run').to.equal(1);
      const got = reports.slice(reportsFrom);
      expect(got.length).to.be.at.least(1);
      for (const g of got) expect(g).to.include({ tz: 'America/Chicago', lang: 'en-US' });

      // another run: another sticky session
      const from2 = seen.length;
      const { run: r2 } = await run([open('open the page')], { proxy_state: 'CA' });
      expect(r2.status).to.equal('succeeded');
      const second = sessionsSince(from2);
      expect(second.size).to.equal(1);
      expect([...second][0]).to.not.equal([...sessionsSince(from)][0]);
      expect(params(seen.at(-1)!.username)).to.include({ country: 'us', state: 'ca' });
      expect(reports.at(-1)).to.include({ tz: 'America/Los_Angeles' });
    });

    if (plane === 'dom_plane') {
      it('gives a run through an exit of another geo the browser that geo had, warm, after a run elsewhere in between', async () => {
        const opened = (runId: string) => {
          const line = gw.logs.find((l) => l.includes('"plane session opened"') && l.includes(`"run_id":"${runId}"`));
          expect(line, `the session of ${runId} opened`).to.not.equal(undefined);
          return JSON.parse(line!) as { warm: boolean; chrome_pid: number; agent_pid: number };
        };
        // a run's plane closes after its result is recorded: the next run starts once the agent is back
        const atRest = async (runId: unknown) => await gw.gateway.services.planeClosing(String(runId));
        const reportsFrom = reports.length;
        const { run: first } = await run([open('open the page')], { proxy_state: 'AZ' });
        expect(first.status).to.equal('succeeded');
        await atRest(first.run_id);
        const { run: between } = await run([open('open the page')], { proxy_disabled: true });
        expect(between.status).to.equal('succeeded');
        await atRest(between.run_id);
        const { run: again } = await run([open('open the page')], { proxy_state: 'AZ' });
        expect(again.status).to.equal('succeeded');
        const [a, b] = [opened(String(first.run_id)), opened(String(again.run_id))];
        expect(b.agent_pid, 'the agent that served the exit').to.equal(a.agent_pid);
        expect(b.warm, 'its browser of that geo kept warm').to.equal(true);
        expect(b.chrome_pid).to.equal(a.chrome_pid);
        expect(reports.slice(reportsFrom).map((x) => x.tz)).to.include.members(['America/Phoenix', 'America/New_York']);
        expect(reports.at(-1)).to.include({ tz: 'America/Phoenix' });
      });

      it("passes the fingerprint page's timezone check for the exit it asked for", async () => {
        // the gateway's own check page, reached through the proxy; its rows are read with selectors on dom_plane
        const page = `${gw.url}/v1/diagnose/fingerprint/page?expect_tz=${encodeURIComponent('America/Denver')}`;
        const { run: r } = await run(
          [
            { intent: 'open the check page', type: 'navigate', url: page },
            { intent: 'let the checks run', type: 'wait', seconds: 2 },
            { intent: 'read the checks', type: 'extract_data', extract: { item_selector: 'tr.fp-row', max_items: 60, fields: [{ name: 'test', type: 'str', selector: 'td.name' }, { name: 'result', type: 'str', selector: 'td.result' }] } },
          ],
          { proxy_state: 'CO' },
        );
        expect(r.status, JSON.stringify(r.steps).slice(0, 400)).to.equal('succeeded');
        const rows = (await gw.req('GET', `/v1/runs/${r.run_id}/artifacts/extracted_rows.json`, { token })).body as Body[];
        const tz = rows.find((x) => x.test === 'timezone vs proxy exit');
        expect(tz?.result, JSON.stringify(rows).slice(0, 600)).to.match(/^pass/);
      });
    }

    it('connects directly with proxy_disabled', async () => {
      const from = seen.length;
      const reportsFrom = reports.length;
      const { run: r } = await run([open('open the page directly')], { proxy_disabled: true });
      expect(r.status).to.equal('succeeded');
      expect(seen.slice(from).filter((s) => s.hostname === '127.0.0.1').length, 'the proxy carried nothing of this run').to.equal(0);
      expect(reports.length - reportsFrom, 'the page loaded').to.be.at.least(1);
    });

    it('retries a step the proxy refused on a new sticky session, which goes through', async () => {
      const from = seen.length;
      const { run: r, events } = await run([open('open through a flaky proxy')], { proxy_provider: 'residential-b' });
      expect(r.status, JSON.stringify(r.steps).slice(0, 500)).to.equal('succeeded');
      expect(r.steps[0].attempts).to.equal(2);
      expect(sessionsSince(from).size, 'a second sticky session after the refusal').to.equal(2);
      expect(events.some((e) => e.type === 'step.finished')).to.equal(true);
    });

    it('fails a proxy that keeps refusing with http_5xx and proxy_error in the step data, and never leaks its password', async () => {
      const from = seen.length;
      const { run: r, life, events } = await run([{ ...open('open through a refusing proxy'), required: true }], { proxy_provider: 'residential-c' });
      expect(r.status).to.equal('failed');
      expect(r.steps[0], JSON.stringify(r.steps[0]).slice(0, 400)).to.include({ success: false, failure_class: 'http_5xx' });
      expect(r.steps[0].data).to.match(/^proxy_error: .*net::ERR_PROXY_AUTH_REQUESTED/);
      expect(sessionsSince(from).size, 'the retry used a new sticky session').to.be.at.least(2);
      expect(life.halt_class).to.equal('navigate_failed');
      const everything = JSON.stringify({ r, life, events }) + gw.logs.join('\n');
      expect(everything).to.not.include(PASSWORD);
      expect(everything).to.not.include('not-the-password');
    });
  });
}

describe('proxy providers file (gateway start)', () => {
  it('refuses to start on a providers file that breaks its schema, naming the field', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-proxies-bad-'));
    const file = path.join(dir, 'providers.json');
    await writeFile(file, JSON.stringify({ providers: { 'residential-a': { host: '127.0.0.1', port: 70000, username: { prefix: 'x' } } } }));
    const err = await startGateway({ env: { SERVICE_PROXY_PROVIDERS_PATH: file } }).then(
      async (g) => {
        await g.close();
        return undefined;
      },
      (e: Error) => e,
    );
    expect(err?.message).to.match(/providers\.residential-a\.port/);
  });

  it('refuses a run naming a provider the file does not have', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-proxies-one-'));
    const file = path.join(dir, 'providers.json');
    await writeFile(file, JSON.stringify({ providers: { 'residential-a': { host: '127.0.0.1', port: 9, username: { prefix: 'x' } } } }));
    const token = newToken();
    const g = await startGateway({ env: { SERVICE_PROXY_PROVIDERS_PATH: file, SERVICE_PROXY_PROVIDER: 'residential-a' }, keys: { [token]: { tenant_id: 'p1' } } });
    try {
      const bad = await g.req('POST', '/v1/predict', { token, body: { plan: [open1()], proxy_provider: 'residential-b' } });
      expect(bad.status).to.equal(400);
      expect(bad.body.detail).to.match(/proxy_provider: 'residential-b' is not configured/);
      const direct = await g.req('POST', '/v1/predict', { token, body: { plan: [open1()], proxy_provider: 'residential-b', proxy_disabled: true } });
      expect(direct.status, direct.text).to.equal(200);
    } finally {
      await g.close();
    }
  });
});

const open1 = () => ({ intent: 'open', type: 'navigate', url: 'https://example.com/' });
