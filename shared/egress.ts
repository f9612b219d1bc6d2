// The egress guard shared by the gateway (webhook deliveries) and the plane agents
// (the browser's traffic, through agents/core/egress-proxy.ts): refuse every address
// that is not globally reachable (shared/egress-ranges.ts: the IANA special-purpose
// registries, private, loopback, link-local, metadata, documentation, multicast ...),
// every address of the host itself (shared/host-addresses.ts), and names that
// resolve to any of them, unless private networks are allowed. What is checked is
// what is dialled: a host is first put in the WHATWG URL parser's canonical form (so
// `0177.0.0.1`, `0x7f.1`, `127.1` or `2130706433` are 127.0.0.1), names are resolved
// once, and the connection is pinned to the address that was checked, so a DNS answer
// that changes between check and connect (rebinding) cannot slip past.
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { LookupFunction } from 'node:net';
import { addressBits, embeddedIPv4, formatIPv4, refusedRange } from './egress-ranges.ts';
import { hostAddresses, type HostAddresses } from './host-addresses.ts';

export { HostAddresses, hostAddresses } from './host-addresses.ts';

/**
 * The host as a browser or http.request would dial it: IPv4 in dotted decimal whatever
 * the notation, IPv6 without brackets, names lower-cased and IDNA-encoded. A string
 * the URL parser refuses, or that carries URL syntax (`@ / ? #`), is returned as given
 * without brackets (it then fails to resolve).
 */
export function canonicalHost(host: string): string {
  const bare = host.replace(/^\[|\]$/g, '');
  if (/[\s@/\\?#]/.test(bare) || bare.includes('%')) return bare;
  try {
    return new URL(`http://${bare.includes(':') ? `[${bare}]` : bare}/`).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return bare;
  }
}

function refusalOf(bits: bigint, own: HostAddresses): string | undefined {
  const inner = embeddedIPv4(bits);
  if (inner) {
    const why = refusalOf(inner.bits, own);
    return why && `${inner.via} of ${formatIPv4(inner.bits)}: ${why}`;
  }
  const range = refusedRange(bits);
  if (!own.has(bits)) return range;
  return range ? `${range}; an address of this host` : 'an address of this host';
}

/** Why a run or a webhook must not reach this address, or undefined when it may. A name (not an address) is refused. */
export function egressRefusal(address: string, own: HostAddresses = hostAddresses): string | undefined {
  const bits = addressBits(address.includes('%') ? address : canonicalHost(address));
  if (bits === undefined) return 'not an IP address';
  return refusalOf(bits, own);
}

/** True when the address is one a run or a webhook must not reach. */
export function isPrivateAddress(address: string, own: HostAddresses = hostAddresses): boolean {
  return egressRefusal(address, own) !== undefined;
}

export class EgressRefused extends Error {
  constructor(
    readonly host: string,
    readonly address: string,
    readonly reason: string,
  ) {
    super(`egress to ${host} (${address}) refused: not globally reachable, ${reason}`);
    this.name = 'EgressRefused';
  }
}

/** Resolves a host once and returns an address that passed the guard. */
export async function resolvePublic(host: string, allowPrivate: boolean, own: HostAddresses = hostAddresses): Promise<{ address: string; family: number }> {
  const name = canonicalHost(host);
  const literal = isIP(name);
  const answers = literal ? [{ address: name, family: literal }] : await dnsLookup(name, { all: true, verbatim: true });
  if (answers.length === 0) throw new Error(`${host} did not resolve`);
  if (!allowPrivate) {
    // every answer must be public: a name with one private answer is refused
    for (const a of answers) {
      const why = egressRefusal(a.address, own);
      if (why) throw new EgressRefused(host, a.address, why);
    }
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
