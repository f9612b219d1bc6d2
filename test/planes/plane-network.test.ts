// The agents' network edges: TLS on both transports (self-signed certificate made by
// the test), the egress guard inside each agent (loopback fixtures are blocked with the
// switch off, reached with it on, redirects included), and a proxy_server given at init
// carrying the browser's requests on both planes.
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { once } from 'node:events';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectPlane, PlaneCallError, type PlaneSession } from '../../gateway/planes/index.ts';
import { isPrivateAddress } from '../../shared/egress.ts';
import { ownAddresses, startHostListener, urlFor } from '../support/host-listener.ts';
import { expectPlaneError, startAgentProcess, startFixture, startRecordingProxy, type AgentProc, type Fixture, waitFor } from './support.ts';

/** A second loopback server whose /go answers 302 to the fixture (a redirect into a private address). */
async function startRedirector(to: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((_req, res) => res.writeHead(302, { location: to }).end());
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const addr = server.address();
  return {
    url: `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe('plane agents: TLS, egress guard and upstream proxy', function () {
  this.timeout(60_000);
  let site: Fixture;

  before(async () => {
    site = await startFixture();
  });
  after(async () => {
    await site?.close();
  });

  it('classifies private, loopback, link-local, metadata and mapped addresses', () => {
    for (const a of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '0.0.0.0', '::1', 'fd12::1', 'fe80::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:a9fe:a9fe']) {
      expect(isPrivateAddress(a), a).to.equal(true);
    }
    for (const a of ['8.8.8.8', '172.32.0.1', '1.1.1.1', '2606:4700::1111', '::ffff:808:808']) expect(isPrivateAddress(a), a).to.equal(false);
  });

  describe('TLS on both transports', () => {
    let agent: AgentProc;
    let ca: Buffer;
    const secret = 'tls-test-secret';

    before(async () => {
      const dir = mkdtempSync(join(tmpdir(), 'plane-tls-'));
      execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
        '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
        '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
      ca = readFileSync(join(dir, 'cert.pem'));
      agent = await startAgentProcess('dom', { PLANE_TLS_CERT: join(dir, 'cert.pem'), PLANE_TLS_KEY: join(dir, 'key.pem'), PLANE_AGENT_SECRET: secret });
    });
    after(async () => {
      await agent?.stop();
    });

    it('serves https:// and grpcs:// to a client that trusts the CA, a whole session over grpcs', async () => {
      const https = connectPlane({ url: `https://127.0.0.1:${agent.httpPort}`, ca, secret });
      const grpcs = connectPlane({ url: `grpcs://127.0.0.1:${agent.grpcPort}`, ca, secret });
      try {
        expect((await https.health()).backend).to.equal('dom_plane');
        expect((await grpcs.health()).backend).to.equal('dom_plane');
        const init = await grpcs.init({ tenant_id: 'acme', profile_id: 'tls', run_id: 'run-tls', persist_profile: false });
        expect(init.capabilities.backend).to.equal('dom_plane');
        await grpcs.dispatch({ verb: 'navigate', url: `${site.url}/page2` });
        https.attach(init.session_token);
        expect((await https.currentUrl()).url).to.equal(`${site.url}/page2`);
        await grpcs.close();
      } finally {
        https.disconnect();
        grpcs.disconnect();
      }
    });

    it('refuses plaintext clients and clients that do not trust the certificate', async () => {
      for (const url of [`http://127.0.0.1:${agent.httpPort}`, `grpc://127.0.0.1:${agent.grpcPort}`, `https://127.0.0.1:${agent.httpPort}`, `grpcs://127.0.0.1:${agent.grpcPort}`]) {
        const s = connectPlane({ url, secret, retries: 0 });
        try {
          const e = await s.health({ deadlineMs: 3000 }).then(
            () => undefined,
            (err: unknown) => err,
          );
          expect(e, url).to.be.instanceOf(PlaneCallError);
          expect((e as PlaneCallError).kind, url).to.be.oneOf(['unavailable', 'timeout']);
        } finally {
          s.disconnect();
        }
      }
    });
  });

  for (const plane of ['dom', 'computer'] as const) {
    describe(`${plane}_plane egress guard`, () => {
      let guarded: AgentProc;
      let s: PlaneSession;
      let redirector: { url: string; close(): Promise<void> };

      /** Loads a URL in the session's browser (dom: the navigate verb; computer: CDP, input is not under test). */
      const open = async (url: string): Promise<void> => {
        if (plane === 'dom') await s.dispatch({ verb: 'navigate', url });
        else {
          const r = await s.cdp(`location.href = ${JSON.stringify(url)}; true`);
          expect(r.returncode, r.result_json).to.equal(0);
        }
      };
      const pageText = async (): Promise<string> => {
        // mid-navigation the page may have no body yet: that reads as no text, and waitFor asks again
        const r = await s.cdp('document.title + " | " + (document.body ? document.body.innerText : "")').catch(() => undefined);
        const v: unknown = r ? JSON.parse(r.result_json) : '';
        return typeof v === 'string' ? v : '';
      };

      before(async () => {
        guarded = await startAgentProcess(plane, { PLANE_ALLOW_PRIVATE_NETWORKS: '0', SERVICE_BEHAVIORAL_JITTER: '0', PLANE_RECORD: '0' });
        redirector = await startRedirector(`${site.url}/page2?via=redirect`);
        s = connectPlane({ url: `grpc://127.0.0.1:${guarded.grpcPort}`, deadlineMs: 20_000 });
        await s.init({ tenant_id: 'acme', profile_id: `egress-${plane}`, run_id: `run-egress-${plane}`, enable_cdp: true, persist_profile: false });
      });
      after(async () => {
        if (s?.token) await s.close();
        s?.disconnect();
        await guarded?.stop();
        await redirector?.close();
      });

      it('blocks a loopback fixture with the switch off, shows a clear page, and records the host', async () => {
        const before = site.hits.length;
        if (plane === 'dom') {
          const e = await expectPlaneError(s.dispatch({ verb: 'navigate', url: `${site.url}/counter?blocked=1` }), 403);
          expect(e.detail).to.match(/egress guard: 127\.0\.0\.1/);
        } else {
          await open(`${site.url}/counter?blocked=1`);
        }
        await waitFor(async () => ((await pageText()).includes('Blocked by the egress guard') ? true : undefined), 10_000, 'blocked page');
        expect(site.hits.slice(before).some((h) => h.includes('blocked=1'))).to.equal(false);
        const st = await s.status();
        expect(st.egress?.allow_private).to.equal(false);
        expect(st.egress?.last_blocked?.host).to.equal('127.0.0.1');
        expect(st.egress?.blocked_count).to.be.greaterThan(0);
      });

      it('blocks names that resolve to loopback and IPv4-mapped IPv6 literals', async () => {
        const before = site.hits.length;
        if (plane === 'dom') {
          // https:// goes through CONNECT: refused the same way, reported as the same 403.
          const e = await expectPlaneError(s.dispatch({ verb: 'navigate', url: `https://localhost:${site.port}/tls` }), 403);
          expect(e.detail).to.match(/egress guard: localhost/);
        }
        for (const url of [`${site.altUrl}/page2?name=1`, `http://[::ffff:127.0.0.1]:${site.port}/page2?mapped=1`]) {
          await open(url).catch((e: unknown) => expect((e as PlaneCallError).status).to.equal(403));
          await waitFor(async () => ((await pageText()).includes('Blocked by the egress guard') ? true : undefined), 10_000, `blocked page for ${url}`);
        }
        expect(site.hits.slice(before)).to.deep.equal([]);
        const host = (await s.status()).egress?.last_blocked?.host;
        // Chromium may retry the refused https:// tunnel to localhost in the background, so the latest block can be that one
        expect(['::ffff:7f00:1', '::ffff:127.0.0.1', 'localhost'], String(host)).to.include(host);
      });

      it("blocks the host's own interface addresses: a service bound to every interface sees nothing", async () => {
        const host = await startHostListener();
        try {
          const done: string[] = [];
          for (const address of ownAddresses()) {
            const url = urlFor(address, host.port, `/admin?plane=${plane}`);
            if (plane === 'dom') {
              const e = await expectPlaneError(s.dispatch({ verb: 'navigate', url }), 403);
              expect(e.detail).to.include(`egress guard: ${address}`);
            } else {
              await open(url);
            }
            await waitFor(async () => ((await pageText()).includes('Blocked by the egress guard') ? true : undefined), 10_000, `blocked page for ${url}`);
            // Chromium may retry a refused page in the background: the previous test's loopback page (a CI run saw
            // ::ffff:7f00:1 land after this block) or this loop's previous address (192.0.2.2 after fd00::2's block,
            // another CI run). The guard's own report must still name this address or one of those retries.
            const last = (await s.status()).egress?.last_blocked?.address;
            expect(plane === 'computer' ? [address, ...done, '::ffff:7f00:1', '::ffff:127.0.0.1'] : [address], `${url}: ${String(last)}`).to.include(last);
            done.push(address);
          }
          expect(host.hits).to.deep.equal([]);
        } finally {
          await host.close();
        }
      });

      it('a redirect chain that starts on a private address never reaches its target', async () => {
        const before = site.hits.length;
        await open(`${redirector.url}/go`).catch((e: unknown) => expect((e as PlaneCallError).status).to.equal(403));
        await waitFor(async () => ((await pageText()).includes('Blocked by the egress guard') ? true : undefined), 10_000, 'blocked redirect');
        expect(site.hits.slice(before)).to.deep.equal([]);
      });

      it('allow_private_networks at init lets the same session policy through (loopback fixture reached)', async () => {
        await s.close();
        await s.init({ tenant_id: 'acme', profile_id: `egress-${plane}`, run_id: `run-allowed-${plane}`, enable_cdp: true, persist_profile: false, allow_private_networks: true });
        await open(`${redirector.url}/go`);
        await waitFor(async () => ((await pageText()).startsWith('Page two') ? true : undefined), 10_000, 'redirected page');
        expect(site.hits).to.include('/page2?via=redirect');
        expect((await s.status()).egress?.allow_private).to.equal(true);
      });
    });
  }

  it('computer_plane: a proxy_server given at init carries the browser requests', async () => {
    const agent = await startAgentProcess('computer', { SERVICE_BEHAVIORAL_JITTER: '0', PLANE_RECORD: '0' });
    const proxy = await startRecordingProxy();
    const s = connectPlane({ url: `http://127.0.0.1:${agent.httpPort}`, deadlineMs: 20_000 });
    try {
      await s.init({ tenant_id: 'acme', profile_id: 'proxied', run_id: 'run-proxy', proxy_server: proxy.url, enable_cdp: true, persist_profile: false });
      await s.cdp(`location.href = ${JSON.stringify(`${site.url}/page2?via=computer-proxy`)}; true`);
      await waitFor(() => (proxy.seen.includes(`GET ${site.url}/page2?via=computer-proxy`) ? true : undefined), 10_000, 'request through the proxy');
      // The proxy records the request before forwarding it: the fixture sees it a moment later.
      await waitFor(() => (site.hits.includes('/page2?via=computer-proxy') ? true : undefined), 10_000, 'the request at the fixture');
      expect((await s.status()).egress?.chained).to.equal(true);
      // A SOCKS upstream cannot be chained behind the guard: refused at init with a detail.
      const other = connectPlane({ url: `http://127.0.0.1:${agent.httpPort}`, retries: 0 });
      const e = await expectPlaneError(other.init({ tenant_id: 'acme', profile_id: 'x', run_id: 'run-x', proxy_server: 'socks5://127.0.0.1:1080' }), 400);
      expect(e.detail).to.match(/HTTP proxy/);
      // the tenant's allowed_domains are checked like every other init field: type, count, length and pattern
      const bad = (allowed_domains: unknown) => other.init({ tenant_id: 'acme', profile_id: 'x', run_id: 'run-x', allowed_domains } as unknown as Parameters<typeof other.init>[0]);
      expect((await expectPlaneError(bad('example.com'), 400)).detail).to.match(/allowed_domains must be an array of at most 1000 strings/);
      expect((await expectPlaneError(bad(Array<string>(1001).fill('example.com')), 400)).detail).to.match(/at most 1000/);
      expect((await expectPlaneError(bad(['example.com', 'x'.repeat(301)]), 400)).detail).to.match(/allowed_domains\[1\] must be 1-300 characters/);
      expect((await expectPlaneError(bad(['10.*.*.*']), 400)).detail).to.match(/allowed_domains\[0\]: .*CIDR range/);
      other.disconnect();
    } finally {
      await s.close();
      s.disconnect();
      await proxy.close();
      await agent.stop();
    }
  });
});
