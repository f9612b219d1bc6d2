import { expect } from 'chai';
import { allowedDomainProblem, hostAllowed } from '../../shared/allowed-domains.ts';
import { tenantFromConfig } from '../../gateway/http/tenants.ts';

describe('allowed_domains: IP literals and ranges', () => {
  it('matches an IPv4 literal as an address, whatever the notation of the pattern or the host', () => {
    expect(hostAllowed('127.0.0.1', ['127.0.0.1'])).to.equal(true);
    expect(hostAllowed('10.1.2.3', ['10.1.2.3'])).to.equal(true);
    expect(hostAllowed('127.0.0.1', ['127.1'])).to.equal(true);
    expect(hostAllowed('127.1', ['127.0.0.1'])).to.equal(true);
    expect(hostAllowed('0x7f.0.0.1', ['127.0.0.1'])).to.equal(true);
    expect(hostAllowed('127.0.0.2', ['127.0.0.1'])).to.equal(false);
    expect(hostAllowed('10.1.2.30', ['10.1.2.3'])).to.equal(false);
  });

  it('matches IPv6 literals in any compressed form, with or without brackets', () => {
    for (const host of ['[::1]', '::1', '0:0:0:0:0:0:0:1', '[0::1]']) {
      for (const pattern of ['::1', '[::1]', '0:0::1']) expect(hostAllowed(host, [pattern]), `${host} ~ ${pattern}`).to.equal(true);
    }
    expect(hostAllowed('[2001:db8::1]', ['2001:DB8:0:0::1'])).to.equal(true);
    expect(hostAllowed('[::2]', ['::1'])).to.equal(false);
    // the IPv4-mapped spelling is the same address the browser dials
    expect(hostAllowed('[::ffff:7f00:1]', ['127.0.0.1'])).to.equal(true);
  });

  it('matches CIDR ranges of both families, never an address outside them, and never a name', () => {
    expect(hostAllowed('10.200.3.4', ['10.0.0.0/8'])).to.equal(true);
    expect(hostAllowed('11.0.0.1', ['10.0.0.0/8'])).to.equal(false);
    expect(hostAllowed('192.168.1.77', ['192.168.1.64/26'])).to.equal(true);
    expect(hostAllowed('192.168.1.128', ['192.168.1.64/26'])).to.equal(false);
    expect(hostAllowed('[fd12::5]', ['fd00::/8'])).to.equal(true);
    expect(hostAllowed('[fe80::1]', ['[fd00::]/8'])).to.equal(false);
    expect(hostAllowed('8.8.8.8', ['0.0.0.0/0'])).to.equal(true);
    expect(hostAllowed('[::1]', ['0.0.0.0/0'])).to.equal(false);
    // names and addresses stay apart: a name pattern never matches an address, an address or range never a name
    expect(hostAllowed('10.1.2.3', ['*.1.2.3', '10.1.2.*', '*.example.com'])).to.equal(false);
    expect(hostAllowed('10.example.com', ['10.0.0.0/8'])).to.equal(false);
    expect(hostAllowed('shop.example.com', ['127.0.0.1', '*.example.com'])).to.equal(true);
    expect(hostAllowed('10.1.2.3', ['*'])).to.equal(true);
  });

  it('refuses a malformed range or a wildcard over an address when the keys file is loaded', () => {
    expect(allowedDomainProblem('10.0.0.0/8')).to.equal(undefined);
    expect(allowedDomainProblem('fd00::/8')).to.equal(undefined);
    expect(allowedDomainProblem('*.example.com')).to.equal(undefined);
    expect(allowedDomainProblem('127.1')).to.equal(undefined);
    expect(allowedDomainProblem('10.0.0.0/33')).to.match(/prefix length must be 0 to 32/);
    expect(allowedDomainProblem('fd00::/129')).to.match(/prefix length must be 0 to 128/);
    expect(allowedDomainProblem('example.com/8')).to.match(/must be an IPv4 or IPv6 address/);
    expect(allowedDomainProblem('10.*.*.*')).to.match(/use a CIDR range/);
    const bad = tenantFromConfig({ tenant_id: 'acme', allowed_domains: ['example.com', '10.0.0.0/40'] });
    expect(bad).to.deep.equal({ problem: "allowed_domains[1]: '10.0.0.0/40': the prefix length must be 0 to 32" });
    expect(tenantFromConfig({ tenant_id: 'acme', allowed_domains: ['10.0.0.0/8', '::1'] })).to.have.property('tenant');
  });
});
