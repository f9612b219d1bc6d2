// The host's own addresses are refused like loopback: every address os.networkInterfaces()
// reports, whatever its range (a public address included), in every spelling that
// dials it, and re-read when the interfaces change.
import { expect } from 'chai';
import type { NetworkInterfaceInfo } from 'node:os';
import { networkInterfaces } from 'node:os';
import { egressRefusal, hostAddresses, HostAddresses, isPrivateAddress, resolvePublic } from '../../shared/egress.ts';

function iface(address: string): NetworkInterfaceInfo {
  const v6 = address.includes(':');
  return v6
    ? { address, family: 'IPv6', internal: false, netmask: 'ffff:ffff:ffff:ffff::', mac: '02:00:00:00:00:01', cidr: `${address}/64`, scopeid: 0 }
    : { address, family: 'IPv4', internal: false, netmask: '255.255.255.0', mac: '02:00:00:00:00:01', cidr: `${address}/24` };
}

describe("egress guard: the host's own addresses", () => {
  it('refuses every address os.networkInterfaces() reports, non-internal ones included, as an address of this host', () => {
    const reported = Object.values(networkInterfaces()).flatMap((l) => l ?? []);
    const external = reported.filter((i) => !i.internal);
    if (external.length === 0) throw new Error('os.networkInterfaces() reports no non-internal address: this check needs one');
    const listed = hostAddresses.list();
    for (const i of reported) {
      const bare = i.address.split('%')[0]!;
      expect(listed, bare).to.include(bare);
      expect(egressRefusal(bare), bare).to.match(/an address of this host$/);
    }
    expect(listed).to.include.members(['0.0.0.0', '::']);
  });

  it('refuses a public interface address in every spelling that dials it, and nothing else', async () => {
    const own = new HostAddresses(() => ({ eth0: [iface('8.8.4.4'), iface('2a01:4f8:c0c:1234::2')] }));
    for (const a of ['8.8.4.4', '::ffff:8.8.4.4', '::ffff:808:404', '64:ff9b::8.8.4.4', '2002:808:404::1', '134743044', '0x8.0x8.0x4.0x4', '2a01:4f8:c0c:1234:0:0:0:2', '2A01:04F8:0C0C:1234::2']) {
      expect(egressRefusal(a, own), a).to.match(/an address of this host$/);
    }
    for (const a of ['8.8.8.8', '8.8.4.5', '2a01:4f8:c0c:1234::3']) expect(isPrivateAddress(a, own), a).to.equal(false);
    const e = await resolvePublic('8.8.4.4', false, own).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(e?.message).to.equal('egress to 8.8.4.4 (8.8.4.4) refused: not globally reachable, an address of this host');
    expect(await resolvePublic('8.8.4.4', true, own)).to.deep.equal({ address: '8.8.4.4', family: 4 });
  });

  it('re-reads the interfaces once the list is older than its maximum age', () => {
    let now = 0;
    let current = [iface('8.8.4.4')];
    const own = new HostAddresses(() => ({ eth0: current }), 1000, () => now);
    expect(isPrivateAddress('8.8.4.4', own)).to.equal(true);
    current = [iface('9.9.9.9')];
    now = 999;
    expect(isPrivateAddress('9.9.9.9', own), 'still the cached list').to.equal(false);
    now = 1000;
    expect(isPrivateAddress('9.9.9.9', own), 'the new address').to.equal(true);
    expect(isPrivateAddress('8.8.4.4', own), 'the address the host no longer has').to.equal(false);
  });
});
