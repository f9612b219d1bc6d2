// The egress guard answers what it would do with a tunnel to a host, without
// recording it: dom_plane asks it when Chromium reports only
// ERR_TUNNEL_CONNECTION_FAILED and the guard's log does not explain it (Chromium
// need not ask the proxy again for a tunnel it saw fail), so a name that does not
// resolve fails http_4xx, not a retried http_5xx.
import { expect } from 'chai';
import { EgressProxy } from '../../agents/core/egress-proxy.ts';

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
    guard.lastBlocked = { host: 'example.test', address: '10.0.0.1', at_ms: 0 };
    expect(await guard.explainTunnel('example.test', 0), 'the log names a refusal of this host').to.equal('EGRESS_REFUSED');
  });
});
