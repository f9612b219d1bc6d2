// The egress guard answers what it would do with a tunnel to a host, without
// recording it: dom_plane asks it when Chromium reports only
// ERR_TUNNEL_CONNECTION_FAILED and the guard's log does not explain it (Chromium
// need not ask the proxy again for a tunnel it saw fail), so a name that does not
// resolve fails http_4xx, not a retried http_5xx.
import { expect } from 'chai';
import { createServer, request, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { EGRESS_HEADER, EgressProxy, sessionEgress } from '../../agents/core/egress-proxy.ts';

/** A listener on every loopback address that counts what reaches it (a plain server, or an upstream proxy's front door). */
async function counter(): Promise<{ server: Server; port: number; hits: string[] }> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'content-type': 'text/plain' }).end('reached');
  });
  server.on('connect', (req, sock) => {
    hits.push(`CONNECT ${req.url}`);
    sock.end('HTTP/1.1 502 Bad Gateway\r\n\r\n');
  });
  server.listen(0, '0.0.0.0');
  await once(server, 'listening');
  return { server, port: (server.address() as AddressInfo).port, hits };
}

/** A plain-HTTP request through the guard: status and the guard's header. */
async function viaGuard(guard: EgressProxy, url: string): Promise<{ status: number; said: string | undefined }> {
  const req = request({ host: '127.0.0.1', port: guard.port, path: url, headers: { host: new URL(url).host } });
  req.end();
  const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
  res.resume();
  return { status: res.statusCode ?? 0, said: res.headers[EGRESS_HEADER] as string | undefined };
}

/** A CONNECT through the guard: its status line. */
async function tunnel(guard: EgressProxy, target: string): Promise<string> {
  const sock = connect(guard.port, '127.0.0.1');
  sock.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  const [d] = (await once(sock, 'data')) as [Buffer];
  sock.destroy();
  return d.toString('latin1').split('\r\n')[0] ?? '';
}

describe("the egress guard's verdict on a host", () => {
  it('says refused, unresolved or null (would connect) as the tunnel would, and records nothing', async () => {
    const guard = new EgressProxy();
    expect(await guard.verdict('nohost.invalid')).to.equal('unresolved');
    expect(await guard.verdict('127.0.0.1')).to.equal('refused');
    expect(await guard.verdict('0x7f.1'), 'the canonical form is what is checked').to.equal('refused');
    expect(await guard.verdict('93.184.215.14'), 'a public address').to.equal(null);
    expect(guard.status()).to.deep.include({ blocked_count: 0, last_blocked: null, last_failure: null });
    guard.configure({ allowPrivate: true, upstream: null });
    expect(await guard.verdict('127.0.0.1')).to.equal(null);
    expect(await guard.verdict('nohost.invalid')).to.equal('unresolved');
    // chained: the upstream resolves the name (geo DNS at its exit), so the guard cannot say it does not exist
    guard.configure({ allowPrivate: false, upstream: 'http://127.0.0.1:9' });
    expect(await guard.verdict('nohost.invalid')).to.equal(null);
    expect(await guard.verdict('10.0.0.1')).to.equal('refused');
  });

  it('explains a tunnel failure: a refusal, what it met connecting since the navigation started, or a name that does not resolve', async () => {
    const guard = new EgressProxy();
    expect(await guard.explainTunnel('10.1.2.3', 0)).to.equal('EGRESS_REFUSED');
    expect(await guard.explainTunnel('nohost.invalid', 0)).to.equal('ERR_NAME_NOT_RESOLVED');
    expect(await guard.explainTunnel('93.184.215.14', 0), 'nothing known').to.equal(null);
    guard.lastFailure = { host: '93.184.215.14', code: 'ERR_CONNECTION_REFUSED', at_ms: 1000 };
    expect(await guard.explainTunnel('93.184.215.14', 1000)).to.equal('ERR_CONNECTION_REFUSED');
    expect(await guard.explainTunnel('93.184.215.14', 1001), 'met before this navigation: not its cause').to.equal(null);
    guard.lastBlocked = { host: 'example.test', address: '10.0.0.1', at_ms: 0, why: 'private_network' };
    expect(await guard.explainTunnel('example.test', 0), 'the log names a refusal of this host').to.equal('EGRESS_REFUSED');
  });

  it("refuses every host outside the tenant's allowed_domains before it connects, directly or chained, and lets the listed ones through", async () => {
    const site = await counter();
    const upstream = await counter();
    const guard = new EgressProxy();
    await guard.start();
    try {
      guard.configure(sessionEgress({ allow_private_networks: true, proxy_server: null, allowed_domains: ['127.0.0.1'] }, {}));
      expect(await viaGuard(guard, `http://127.0.0.1:${site.port}/listed`)).to.deep.equal({ status: 200, said: undefined });
      // the same listener under names the list does not hold: a different host for the matcher
      expect(await viaGuard(guard, `http://127.0.0.2:${site.port}/other`)).to.deep.equal({ status: 403, said: 'blocked' });
      expect(await viaGuard(guard, `http://localhost:${site.port}/other`)).to.deep.equal({ status: 403, said: 'blocked' });
      expect(await tunnel(guard, `localhost:${site.port}`)).to.match(/^HTTP\/1\.1 403/);
      expect(guard.status()).to.deep.include({ blocked_count: 3 });
      expect(guard.lastBlocked).to.deep.include({ host: 'localhost', why: 'allowed_domains' });
      expect(await guard.verdict('127.0.0.2')).to.equal('refused');
      expect(await guard.explainTunnel('localhost', 0)).to.equal('EGRESS_REFUSED');
      expect(site.hits).to.deep.equal(['GET /listed']);
      // chained to an upstream proxy: an off-list host never reaches the upstream either
      guard.configure(sessionEgress({ allow_private_networks: true, proxy_server: `http://127.0.0.1:${upstream.port}`, allowed_domains: ['*.allowed.test'] }, {}));
      expect(await viaGuard(guard, 'http://elsewhere.test/x')).to.deep.equal({ status: 403, said: 'blocked' });
      expect(await tunnel(guard, 'elsewhere.test:443')).to.match(/^HTTP\/1\.1 403/);
      expect(await viaGuard(guard, 'http://a.allowed.test/y')).to.deep.include({ status: 200 });
      expect(upstream.hits).to.deep.equal(['GET http://a.allowed.test/y']);
      // no list: no restriction, as before
      guard.configure(sessionEgress({ allow_private_networks: true, proxy_server: null }, {}));
      expect(await viaGuard(guard, `http://127.0.0.2:${site.port}/unlisted`)).to.deep.include({ status: 200 });
    } finally {
      await guard.stop();
      site.server.close();
      upstream.server.close();
    }
  });
});
