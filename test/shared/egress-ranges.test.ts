// The egress guard's classification against the IANA special-purpose registries: the
// first and last address of every refused block, the addresses just outside it that
// are globally reachable, the embeddings of IPv4 in IPv6, and odd IPv4 notations.
import { expect } from 'chai';
import { isPrivateAddress, resolvePublic } from '../../shared/egress.ts';

const F = 'ffff:ffff:ffff:ffff';

/** [block, addresses inside it (refused), addresses just outside it that are globally reachable (allowed)] */
const TABLE: Array<[string, string[], string[]]> = [
  ['0.0.0.0/8', ['0.0.0.0', '0.255.255.255'], ['1.0.0.0']],
  ['10.0.0.0/8', ['10.0.0.0', '10.255.255.255'], ['9.255.255.255', '11.0.0.0']],
  ['100.64.0.0/10', ['100.64.0.0', '100.127.255.255'], ['100.63.255.255', '100.128.0.0']],
  ['127.0.0.0/8', ['127.0.0.0', '127.255.255.255'], ['126.255.255.255', '128.0.0.0']],
  ['169.254.0.0/16', ['169.254.0.0', '169.254.169.254', '169.254.255.255'], ['169.253.255.255', '169.255.0.0']],
  ['172.16.0.0/12', ['172.16.0.0', '172.31.255.255'], ['172.15.255.255', '172.32.0.0']],
  ['192.0.0.0/24', ['192.0.0.0', '192.0.0.8', '192.0.0.9', '192.0.0.10', '192.0.0.170', '192.0.0.255'], ['191.255.255.255', '192.0.1.0']],
  ['192.0.2.0/24', ['192.0.2.0', '192.0.2.255'], ['192.0.1.255', '192.0.3.0']],
  ['192.88.99.0/24', ['192.88.99.0', '192.88.99.255'], ['192.88.98.255', '192.88.100.0']],
  ['192.168.0.0/16', ['192.168.0.0', '192.168.255.255'], ['192.167.255.255', '192.169.0.0']],
  ['198.18.0.0/15', ['198.18.0.0', '198.19.255.255'], ['198.17.255.255', '198.20.0.0']],
  ['198.51.100.0/24', ['198.51.100.0', '198.51.100.255'], ['198.51.99.255', '198.51.101.0']],
  ['203.0.113.0/24', ['203.0.113.0', '203.0.113.255'], ['203.0.112.255', '203.0.114.0']],
  ['224.0.0.0/4', ['224.0.0.0', '239.255.255.255'], ['223.255.255.255']],
  ['240.0.0.0/4', ['240.0.0.0', '255.255.255.254'], []],
  ['255.255.255.255/32', ['255.255.255.255'], []],
  // globally reachable entries of the IPv4 registry (AS112, AMT)
  ['reachable IPv4 special-purpose', [], ['192.31.196.1', '192.52.193.1', '192.175.48.1']],
  ['::/128', ['::'], []],
  ['::1/128', ['::1'], []],
  ['::/96 IPv4-compatible', ['::2', '::7f00:1', '::8.8.8.8', '::ffff:ffff'], []],
  ['64:ff9b:1::/48', ['64:ff9b:1::', `64:ff9b:1:ffff:${F}:ffff`], []],
  ['100::/64', ['100::', `100::${F}`], []],
  ['100:0:0:1::/64', ['100:0:0:1::', `100:0:0:1:${F}`], []],
  ['2001::/23', ['2001::', `2001:1ff:ffff:ffff:${F}`, '2001:0:4136:e378:8000:63bf:3fff:fdd2', '2001:1::1', '2001:1::2', '2001:1::3', '2001:2::', `2001:2:0:ffff:${F}`, '2001:10::', `2001:1f:ffff:ffff:${F}`, '2001:4:111::', '2001:4:113::', `2001:2:ffff:ffff:${F}`], ['2001:200::', `2000:ffff:ffff:ffff:${F}`]],
  // the globally reachable sub-blocks of 2001::/23: AMT, AS112-v6, ORCHIDv2, DETs
  ['2001::/23 reachable carve-outs', [], ['2001:3::', `2001:3:ffff:ffff:${F}`, '2001:4:112::', `2001:4:112:ffff:${F}`, '2001:20::', `2001:2f:ffff:ffff:${F}`, '2001:30::', `2001:3f:ffff:ffff:${F}`]],
  ['2001:db8::/32', ['2001:db8::', `2001:db8:ffff:ffff:${F}`], [`2001:db7:ffff:ffff:${F}`, '2001:db9::']],
  ['3fff::/20', ['3fff::', `3fff:fff:ffff:ffff:${F}`], [`3ffe:ffff:ffff:ffff:${F}`, '3fff:1000::']],
  ['5f00::/16', ['5f00::', `5f00:ffff:ffff:ffff:${F}`], []],
  ['fc00::/7', ['fc00::', 'fd12::3', `fdff:ffff:ffff:ffff:${F}`], []],
  ['fe80::/10', ['fe80::', 'fe80::1%eth0', `febf:ffff:ffff:ffff:${F}`], []],
  ['fec0::/10', ['fec0::', `feff:ffff:ffff:ffff:${F}`], []],
  ['ff00::/8', ['ff00::', 'ff02::1', `ffff:ffff:ffff:ffff:${F}`], []],
  ['outside 2000::/3', ['4000::1', '1000::1', 'e000::1'], ['2606:4700::1111', '2a00:1450:4001:80b::200e', '2001:4860:4860::8888']],
  ['::ffff:0:0/96 IPv4-mapped', ['::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:a9fe:a9fe', '::ffff:192.0.2.1', '::ffff:c633:6401', '0:0:0:0:0:ffff:10.0.0.1'], ['::ffff:8.8.8.8', '::ffff:808:808']],
  ['64:ff9b::/96 NAT64', ['64:ff9b::127.0.0.1', '64:ff9b::a00:1', '64:ff9b::169.254.169.254', '64:ff9b::192.0.2.1', '64:ff9b::203.0.113.7', '64:ff9b::100.64.0.1'], ['64:ff9b::8.8.8.8', '64:ff9b::101:101']],
  ['2002::/16 6to4', ['2002:7f00:1::1', '2002:a00:1::', '2002:c0a8:101::1', '2002:a9fe:a9fe::', '2002:c000:201::1', '2002:cb00:7100::'], ['2002:808:808::1', '2002:101:101::']],
  ['public', [], ['8.8.8.8', '1.1.1.1', '2606:4700::1111']],
];

describe('egress guard: special-purpose address ranges', () => {
  it('refuses the first and last address of every block and allows the globally reachable addresses around them', () => {
    // every misclassified address at once, named by its block
    const wrong: string[] = [];
    for (const [blockName, inside, outside] of TABLE) {
      for (const a of inside) if (!isPrivateAddress(a)) wrong.push(`${a} (${blockName}) allowed`);
      for (const a of outside) if (isPrivateAddress(a)) wrong.push(`${a} (next to ${blockName}) refused`);
    }
    expect(wrong).to.deep.equal([]);
    expect(TABLE.flatMap(([, inside]) => inside)).to.have.length.at.least(90);
  });

  it('reads odd IPv4 notations as the address they dial (decimal, octal, hex, short)', () => {
    for (const a of ['3232235777', '2130706433', '0177.0.0.1', '0x7f.1', '0x7f000001', '127.1', '0300.0250.0001.0001', '10.1', '0xa9.0xfe.0xa9.0xfe', '127.0.0.1.']) {
      expect(isPrivateAddress(a), a).to.equal(true);
    }
    for (const a of ['134744072', '0x8.0x8.0x8.0x8', '010.010.010.010']) expect(isPrivateAddress(a), a).to.equal(false);
  });

  it('resolvePublic checks and returns the address that is dialled, whatever the notation', async () => {
    for (const host of ['0x7f.1', '3232235777', '0177.0.0.1', '[::ffff:7f00:1]', '192.0.2.9', '[64:ff9b::a00:1]', '[2002:c0a8:101::]']) {
      const e = await resolvePublic(host, false).then(
        () => undefined,
        (err: Error) => err,
      );
      expect(e?.message, host).to.match(/^egress to .* refused/);
    }
    expect(await resolvePublic('134744072', false)).to.deep.equal({ address: '8.8.8.8', family: 4 });
    expect(await resolvePublic('0x7f.1', true)).to.deep.equal({ address: '127.0.0.1', family: 4 });
  });
});
