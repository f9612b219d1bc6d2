// Issue 12: a navigation that did not load never succeeds. On dom_plane (real
// agent, real Chromium): a refused connection, a name that does not resolve, a
// page slower than the navigation budget, a 404, and the egress
// guard's refusal each fail the navigate step with a class of the spec's
// taxonomy and the browser's error in `data`; a required navigate halts the run
// with navigate_failed, failure_help and the halting step's entry.
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { newToken, startGateway, type TestGateway } from '../support/gateway.ts';
import { freePort } from '../support/redis.ts';
import { startSite, type Site } from '../support/site.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('navigations that do not load (dom_plane, real agent and Chromium)', function () {
  this.timeout(180_000);
  let gw: TestGateway;
  let guarded: TestGateway;
  let site: Site;
  let slow: Server;
  let slowUrl: string;
  const token = newToken();

  before(async () => {
    site = await startSite();
    // answers after 25 s: past the agent's navigation budget
    slow = createServer((_req, res) => void setTimeout(() => res.writeHead(200, { 'content-type': 'text/html' }).end('<title>late</title>'), 25_000).unref());
    slow.listen(0, '127.0.0.1');
    await once(slow, 'listening');
    slowUrl = `http://127.0.0.1:${(slow.address() as AddressInfo).port}/slow`;
    const keys = { [token]: { tenant_id: 'nav', rate_limit_per_minute: 0, max_concurrent_runs: 10, default_compute_backend: 'dom_plane' } };
    [gw, guarded] = await Promise.all([
      startGateway({ env: { SERVICE_RUNNER: 'on', SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1', SERVICE_MAX_ACTIVE_RUNS: '2' }, keys }),
      // private networks refused: the agents' egress guard refuses the loopback site
      startGateway({ env: { SERVICE_RUNNER: 'on', SERVICE_PLANES: 'local', SERVICE_MAX_ACTIVE_RUNS: '1' }, keys }),
    ]);
  });
  after(async () => {
    await Promise.all([gw?.close(), guarded?.close()]);
    slow?.closeAllConnections();
    slow?.close();
    await site?.close();
  });

  async function navigateOnce(g: TestGateway, url: string): Promise<{ run: Body; life: Body }> {
    const plan = [{ intent: 'open the page', type: 'navigate', url, required: true }];
    const r = await g.req('POST', '/v1/predict', { token, body: { plan, detached: false, compute_backend: 'dom_plane' } });
    expect(r.status, r.text).to.equal(200);
    const life = await g.req('GET', `/v1/runs/${r.body.run_id}`, { token });
    return { run: r.body, life: life.body };
  }

  function expectHalted(r: { run: Body; life: Body }, failureClass: string, data: RegExp): void {
    expect(r.run.status, JSON.stringify(r.run)).to.equal('failed');
    const step = r.run.steps.at(-1) as Body;
    expect(step.success).to.equal(false);
    expect(step.failure_class, JSON.stringify(step)).to.equal(failureClass);
    expect(step.data).to.match(data);
    expect(r.life.halt_class).to.equal('navigate_failed');
    expect(r.life.failure_help.halt_class).to.equal('navigate_failed');
    expect(r.life.failure_help.debug_surfaces.events).to.equal(`/v1/runs/${r.run.run_id}/events`);
    expect(r.run.error).to.equal('navigation_blocked');
  }

  it('a refused connection fails http_5xx (retried) with net::ERR_CONNECTION_REFUSED', async () => {
    const r = await navigateOnce(gw, `http://127.0.0.1:${await freePort()}/`);
    expectHalted(r, 'http_5xx', /net::ERR_CONNECTION_REFUSED/);
    expect((r.run.steps.at(-1) as Body).attempts).to.equal(3);
  });

  it('a name that does not resolve fails http_4xx (not retried) with net::ERR_NAME_NOT_RESOLVED, over http and https', async () => {
    for (const url of ['http://nohost.invalid/', 'https://nohost.invalid/']) {
      const r = await navigateOnce(gw, url);
      expectHalted(r, 'http_4xx', /net::ERR_NAME_NOT_RESOLVED/);
      expect((r.run.steps.at(-1) as Body).attempts, url).to.equal(1);
    }
  });

  it('an https:// target that refuses the connection fails http_5xx with net::ERR_CONNECTION_REFUSED, not a bare tunnel error', async () => {
    const r = await navigateOnce(gw, `https://127.0.0.1:${await freePort()}/`);
    expectHalted(r, 'http_5xx', /net::ERR_CONNECTION_REFUSED/);
  });

  it('a page slower than the navigation budget fails nav_timeout', async () => {
    const r = await navigateOnce(gw, slowUrl);
    expectHalted(r, 'nav_timeout', /NAV_TIMEOUT|ERR_TIMED_OUT/);
  });

  it('a 404 fails http_4xx', async () => {
    expectHalted(await navigateOnce(gw, `${site.url}/nope`), 'http_4xx', /HTTP 404/);
  });

  it('the egress guard refusal fails http_4xx with EGRESS_REFUSED, never success', async () => {
    const r = await navigateOnce(guarded, `${site.url}/list`);
    expectHalted(r, 'http_4xx', /EGRESS_REFUSED|egress guard/);
  });
});
