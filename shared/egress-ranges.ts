// The address ranges the egress guard refuses: every entry of the IANA IPv4 and IPv6
// Special-Purpose Address Registries whose "Globally Reachable" is False or N/A, plus
// multicast, the deprecated site-local and IPv4-compatible blocks, and all IPv6 space
// outside 2000::/3 (reserved by the IETF, never global unicast). Addresses are
// matched as 128-bit numbers against exact CIDR blocks; an IPv4 address is kept in
// its IPv4-mapped form (::ffff:a.b.c.d), so the mapped spellings meet the same rules.
//
// Decisions: the globally reachable anycast /32s and /128s inside refused blocks
// (192.0.0.9 PCP, 192.0.0.10 TURN, 2001:1::1-3 PCP/TURN/DNS-SD SRP) stay refused:
// they answer at the nearest server, usually the operator's own network, and no run
// or webhook has a reason to reach them. The globally reachable sub-blocks of
// 2001::/23 (AMT, AS112, ORCHIDv2, DETs) are allowed, as are the IPv4 registry's
// globally reachable entries (AS112, AMT), which no refused block covers.
// NAT64 (64:ff9b::/96) and 6to4 (2002::/16) are judged by the IPv4 address inside.
import { isIP } from 'node:net';

const MAPPED = 0xffffn << 32n;

/** A valid IPv4 or IPv6 literal (an IPv6 zone id is dropped) as 128 bits; IPv4 in its mapped form. */
export function addressBits(address: string): bigint | undefined {
  const bare = address.replace(/^\[|\]$/g, '').split('%')[0] ?? '';
  const family = isIP(bare);
  if (family === 4) return MAPPED | v4Bits(bare);
  if (family !== 6) return undefined;
  let text = bare.toLowerCase();
  const dotted = text.lastIndexOf(':');
  if (text.includes('.')) {
    const v4 = v4Bits(text.slice(dotted + 1));
    text = `${text.slice(0, dotted + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const groups = (s: string): string[] => (s === '' ? [] : s.split(':'));
  const hi = groups(head);
  const lo = tail === undefined ? [] : groups(tail);
  const all = [...hi, ...Array<string>(8 - hi.length - lo.length).fill('0'), ...lo];
  return all.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
}

function v4Bits(dotted: string): bigint {
  return dotted.split('.').reduce((acc, o) => (acc << 8n) | BigInt(Number(o)), 0n);
}

/** The dotted form of the IPv4 address in the low 32 bits. */
export function formatIPv4(bits: bigint): string {
  return [24n, 16n, 8n, 0n].map((s) => String((bits >> s) & 255n)).join('.');
}

interface Block {
  base: bigint;
  length: number;
  cidr: string;
  name: string;
  /** true: a globally reachable carve-out inside a refused block */
  reachable: boolean;
}

function block(cidr: string, name: string, reachable = false): Block {
  const [net = '', len = ''] = cidr.split('/');
  const bits = addressBits(net);
  if (bits === undefined) throw new Error(`bad range ${cidr}`);
  const length = Number(len) + (isIP(net) === 4 ? 96 : 0);
  return { base: bits, length, cidr, name, reachable };
}

/** IPv4 blocks (IANA IPv4 Special-Purpose Address Registry, multicast, limited broadcast). */
export const IPV4_REFUSED: readonly Block[] = [
  block('0.0.0.0/8', '"this network" (RFC 791)'),
  block('0.0.0.0/32', '"this host", connects to the host itself'),
  block('10.0.0.0/8', 'private-use (RFC 1918)'),
  block('100.64.0.0/10', 'shared address space, carrier-grade NAT (RFC 6598)'),
  block('127.0.0.0/8', 'loopback'),
  block('169.254.0.0/16', 'link-local, cloud metadata (RFC 3927)'),
  block('172.16.0.0/12', 'private-use (RFC 1918)'),
  block('192.0.0.0/24', 'IETF protocol assignments, anycast /32s included (RFC 6890)'),
  block('192.0.0.0/29', 'IPv4 service continuity prefix, DS-Lite (RFC 7335)'),
  block('192.0.0.170/31', 'NAT64/DNS64 discovery (RFC 7050)'),
  block('192.0.2.0/24', 'documentation, TEST-NET-1 (RFC 5737)'),
  block('192.88.99.0/24', 'deprecated 6to4 relay anycast (RFC 7526)'),
  block('192.168.0.0/16', 'private-use (RFC 1918)'),
  block('198.18.0.0/15', 'benchmarking (RFC 2544)'),
  block('198.51.100.0/24', 'documentation, TEST-NET-2 (RFC 5737)'),
  block('203.0.113.0/24', 'documentation, TEST-NET-3 (RFC 5737)'),
  block('224.0.0.0/4', 'multicast (RFC 5771)'),
  block('240.0.0.0/4', 'reserved (RFC 1112)'),
  block('255.255.255.255/32', 'limited broadcast (RFC 919)'),
];

/** IPv6 blocks (IANA IPv6 Special-Purpose Address Registry, multicast, site-local). */
export const IPV6_REFUSED: readonly Block[] = [
  block('::/128', 'unspecified, connects to the host itself'),
  block('::1/128', 'loopback'),
  block('::/96', 'IPv4-compatible, deprecated (RFC 4291)'),
  block('64:ff9b:1::/48', 'local-use IPv4/IPv6 translation (RFC 8215)'),
  block('100::/64', 'discard-only (RFC 6666)'),
  block('100:0:0:1::/64', 'dummy IPv6 prefix (RFC 9780)'),
  block('2001::/23', 'IETF protocol assignments (RFC 2928)'),
  block('2001::/32', 'Teredo (RFC 4380)'),
  block('2001:1::1/128', 'PCP anycast (RFC 7723)'),
  block('2001:1::2/128', 'TURN anycast (RFC 8155)'),
  block('2001:1::3/128', 'DNS-SD SRP anycast (RFC 9665)'),
  block('2001:2::/48', 'benchmarking (RFC 5180)'),
  block('2001:3::/32', 'AMT (RFC 7450)', true),
  block('2001:4:112::/48', 'AS112-v6 (RFC 7535)', true),
  block('2001:10::/28', 'deprecated ORCHID (RFC 4843)'),
  block('2001:20::/28', 'ORCHIDv2 (RFC 7343)', true),
  block('2001:30::/28', 'drone remote ID entity tags (RFC 9374)', true),
  block('2001:db8::/32', 'documentation (RFC 3849)'),
  block('3fff::/20', 'documentation (RFC 9637)'),
  block('5f00::/16', 'segment routing SIDs (RFC 9602)'),
  block('fc00::/7', 'unique-local (RFC 4193)'),
  block('fe80::/10', 'link-local (RFC 4291)'),
  block('fec0::/10', 'site-local, deprecated (RFC 3879)'),
  block('ff00::/8', 'multicast (RFC 4291)'),
];

// most specific first: the first block that holds an address names it
const TABLE = [...IPV4_REFUSED, ...IPV6_REFUSED].sort((a, b) => b.length - a.length);

const within = (bits: bigint, base: bigint, length: number): boolean => bits >> BigInt(128 - length) === base >> BigInt(128 - length);

const IPV4_MAPPED = block('::ffff:0:0/96', 'IPv4-mapped');
const NAT64 = block('64:ff9b::/96', 'NAT64 well-known prefix (RFC 6052)');
const SIX_TO_FOUR = block('2002::/16', '6to4 (RFC 3056)');
const GLOBAL_UNICAST = block('2000::/3', 'global unicast');

/** The IPv4 address a NAT64 or 6to4 address carries, as a mapped address, with the kind. */
export function embeddedIPv4(bits: bigint): { via: string; bits: bigint } | undefined {
  if (within(bits, NAT64.base, NAT64.length)) return { via: 'NAT64', bits: MAPPED | (bits & 0xffffffffn) };
  if (within(bits, SIX_TO_FOUR.base, SIX_TO_FOUR.length)) return { via: '6to4', bits: MAPPED | ((bits >> 80n) & 0xffffffffn) };
  return undefined;
}

/** Why the range the address is in is refused (`cidr name`), or undefined when it is globally reachable. */
export function refusedRange(bits: bigint): string | undefined {
  const hit = TABLE.find((b) => within(bits, b.base, b.length));
  if (hit) return hit.reachable ? undefined : `${hit.cidr} ${hit.name}`;
  if (within(bits, IPV4_MAPPED.base, IPV4_MAPPED.length) || within(bits, GLOBAL_UNICAST.base, GLOBAL_UNICAST.length)) return undefined;
  return 'outside 2000::/3, reserved by the IETF (not global unicast)';
}
