// The egress guard shared by the gateway (webhook deliveries) and the plane agents
// (the browser's traffic, through agents/core/egress-proxy.ts): refuse private, loopback, link-local, unique-local and metadata
// addresses, and names that resolve to them, unless private networks are
// allowed. The connection is pinned to the address that was checked, so a DNS
// answer that changes between check and connect (rebinding) cannot slip past.
import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import type { LookupFunction } from 'node:net';

const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) blocked.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) blocked.addSubnet(net, prefix, 'ipv6');

/** The IPv4 address inside an IPv4-mapped IPv6 one (`::ffff:a.b.c.d` or `::ffff:hhhh:hhhh`). */
function ipv4Mapped(address: string): string | undefined {
  const dotted = /^(?:0{0,4}:){0,5}:?ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  if (dotted) return dotted;
  const hex = /^(?:0{0,4}:){0,5}:?ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
  if (!hex) return undefined;
  const hi = parseInt(hex[1] ?? '0', 16);
  const lo = parseInt(hex[2] ?? '0', 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** True when the address is one a run or a webhook must not reach. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family === 6) {
    const mapped = ipv4Mapped(address);
    if (mapped) return blocked.check(mapped, 'ipv4');
    return blocked.check(address, 'ipv6');
  }
  return true;
}

export class EgressRefused extends Error {
  constructor(host: string, address: string) {
    super(`egress to ${host} (${address}) refused: private, loopback, link-local or metadata address`);
    this.name = 'EgressRefused';
  }
}

/** Resolves a host once and returns an address that passed the guard. */
export async function resolvePublic(host: string, allowPrivate: boolean): Promise<{ address: string; family: number }> {
  const bare = host.replace(/^\[|\]$/g, '');
  const literal = isIP(bare);
  const answers = literal ? [{ address: bare, family: literal }] : await dnsLookup(bare, { all: true, verbatim: true });
  if (answers.length === 0) throw new Error(`${host} did not resolve`);
  if (!allowPrivate) {
    // every answer must be public: a name with one private answer is refused
    const bad = answers.find((a) => isPrivateAddress(a.address));
    if (bad) throw new EgressRefused(host, bad.address);
  }
  return answers[0]!;
}

/** A `lookup` for http.request that always answers with the checked address. */
export function pinnedLookup(address: string, family: number): LookupFunction {
  return ((_hostname: string, options: unknown, callback?: unknown) => {
    const cb = (typeof options === 'function' ? options : callback) as (err: Error | null, address: string | Array<{ address: string; family: number }>, family?: number) => void;
    const all = typeof options === 'object' && options !== null && (options as { all?: boolean }).all;
    if (all) cb(null, [{ address, family }]);
    else cb(null, address, family);
  }) as LookupFunction;
}
