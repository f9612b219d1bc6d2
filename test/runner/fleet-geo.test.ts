// Placement on a fleet of dom_plane agents (SERVICE_PLANES, two agents) by proxy exit:
// a run through an exit goes to the agent that served that exit lately, where the
// browser of that geo waits warm, even after runs elsewhere in between. Without the
// affinity, placement is by load with ties shuffled: each of the later runs would
// find that agent one time in two. Real agents, Chromium, proxy-chain as the provider.
import { expect } from 'chai';
import { createServer, type Server as HttpServer } from 'node:http';
import { once } from 'node:events';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { Server as ProxyServer } from 'proxy-chain';
import { RUNNER_ENV, newToken, startGateway, type TestGateway } from '../support/gateway.ts';
import { startAgentProcess, type AgentProc } from '../planes/support.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('a fleet of dom_plane agents: runs through a proxy exit go where that geo is warm', function () {
  this.timeout(300_000);
  const token = newToken();
  let gw: TestGateway;
  let proxy: ProxyServer;
  let site: HttpServer;
  let siteUrl: string;
  let agents: AgentProc[] = [];
  const zones: string[] = [];

  before(async () => {
    site = createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      if (u.pathname === '/report') zones.push(u.searchParams.get('tz') ?? '');
      res.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><title>Where</title><script>fetch('/report?tz=' + encodeURIComponent(Intl.DateTimeFormat().resolvedOptions().timeZone))</script>`);
    });
    site.listen(0, '127.0.0.1');
    await once(site, 'listening');
    siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    proxy = new ProxyServer({ port: 0, host: '127.0.0.1', prepareRequestFunction: ({ password }) => (password === 'pw' ? {} : { requestAuthentication: true, failMsg: 'bad credentials' }) });
    await proxy.listen();
    agents = await Promise.all([0, 1].map(() => startAgentProcess('dom', { PLANE_WARM_POOL: '1', SERVICE_GEO_CONSISTENCY: '1' })));
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-fleet-geo-'));
    await mkdir(path.join(dir, 'secrets'));
    await writeFile(path.join(dir, 'secrets', 'proxy'), 'pw\n');
    await writeFile(path.join(dir, 'providers.json'), JSON.stringify({ providers: { resi: { host: '127.0.0.1', port: proxy.port, username: { prefix: 'customer-acme' }, password_secret: 'proxy', default_country: 'us' } } }));
    gw = await startGateway({
      env: {
        ...RUNNER_ENV,
        SERVICE_PLANES: agents.map((a) => `dom_plane=grpc://127.0.0.1:${a.grpcPort}`).join(','),
        SERVICE_PROXY_PROVIDERS_PATH: path.join(dir, 'providers.json'),
        SERVICE_SECRETS_DIR: path.join(dir, 'secrets'),
        SERVICE_PROXY_PROVIDER: 'resi',
      },
      keys: { [token]: { tenant_id: 'geo', rate_limit_per_minute: 0, max_concurrent_runs: 2, default_compute_backend: 'dom_plane' } },
    });
  });
  after(async () => {
    await gw?.close();
    for (const a of agents) await a.stop();
    await proxy?.close(true);
    site?.closeAllConnections();
    site?.close();
  });

  async function run(runtime: Body): Promise<{ agent: string; warm: boolean; chrome_pid: number }> {
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan: [{ intent: 'open the page', type: 'navigate', url: `${siteUrl}/where` }], detached: false, compute_backend: 'dom_plane', ...runtime } });
    expect(r.status, r.text).to.equal(200);
    expect(r.body.status, JSON.stringify(r.body)).to.equal('succeeded');
    const id = String(r.body.run_id);
    // the next run starts once this run's session is closed and its agent is free again
    await gw.gateway.services.planeClosing(id);
    const line = (msg: string) => JSON.parse(gw.logs.find((l) => l.includes(`"${msg}"`) && l.includes(`"run_id":"${id}"`)) ?? '{}') as Body;
    const opened = line('plane session opened');
    return { agent: String(line('run placed on a plane agent').agent), warm: opened.warm === true, chrome_pid: Number(opened.chrome_pid) };
  }

  it('places each run through the AZ exit on the agent that served it first, warm, with runs without a proxy in between', async () => {
    const first = await run({ proxy_state: 'AZ' });
    expect(first.agent).to.not.equal('undefined');
    for (let i = 0; i < 3; i++) {
      await run({ proxy_disabled: true });
      const again = await run({ proxy_state: 'AZ' });
      expect(again.agent, `AZ run ${i + 2}: the agent that served the exit`).to.equal(first.agent);
      expect(again.warm, 'its browser of that geo kept warm').to.equal(true);
      expect(again.chrome_pid).to.equal(first.chrome_pid);
    }
    expect(zones.filter((z) => z === 'America/Phoenix')).to.have.length(4);
  });
});
