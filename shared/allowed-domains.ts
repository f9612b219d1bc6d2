// allowed_domains matching. A pattern is a host name, optionally with `*`
// wildcards: a leading `*.` matches one or more labels and never the apex
// (`*.example.com` matches a.example.com and a.b.example.com, not example.com;
// list both to allow both); any other `*` matches within one label; `*` alone
// matches every host. Case-insensitive, trailing dots ignored, IDNs compared
// in their ASCII (punycode) form, ports ignored.
//
// A pattern may also be an IP literal (`127.0.0.1`, `::1`, `[::1]`) or a CIDR
// range (`10.0.0.0/8`, `fd00::/8`). Addresses are compared as addresses, in the
// form the browser dials (shared/egress.ts canonicalHost: `127.1` is 127.0.0.1,
// IPv6 in any compressed spelling, an IPv4-mapped IPv6 address equals its IPv4
// one), never as labels: a host that is an address matches only address and
// range patterns (and `*` alone), and a wildcard over digits (`10.*.*.*`) is
// refused at load (allowedDomainProblem) in favour of a range.
import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import { canonicalHost } from './egress.ts';
import { addressBits } from './egress-ranges.ts';

interface Range {
  bits: bigint;
  /** Prefix length in the 128-bit space (an IPv4 /8 is a /104 of its mapped form). */
  prefix: number;
}

type Compiled = { kind: 'name'; re: RegExp } | { kind: 'range'; range: Range } | { kind: 'invalid' };

const cache = new Map<string, Compiled>();

function normalizeHost(host: string): string {
  return host.toLowerCase().replace(/\.$/, '');
}

/** The address a pattern or host names, as 128 bits, or undefined when it is a name. */
function literalBits(text: string): bigint | undefined {
  if (text.includes('*')) return undefined;
  const canonical = canonicalHost(text);
  return isIP(canonical) ? addressBits(canonical) : undefined;
}

function parseRange(pattern: string): Range | { problem: string } {
  const slash = pattern.indexOf('/');
  const base = pattern.slice(0, slash).replace(/^\[|\]$/g, '');
  const length = pattern.slice(slash + 1);
  const family = isIP(base);
  // strict notation for ranges: a shorthand base (`10/8`) is more likely a typo than intended
  if (family === 0) return { problem: `'${pattern}': a range must be an IPv4 or IPv6 address in full, '/', a prefix length` };
  const max = family === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(length) || Number(length) > max) return { problem: `'${pattern}': the prefix length must be 0 to ${max}` };
  const prefix = Number(length) + (family === 4 ? 96 : 0);
  return { bits: addressBits(base)!, prefix };
}

function compileName(p: string): RegExp {
  let prefix = '';
  if (p.startsWith('*.')) {
    prefix = '(?:[^.]+\\.)+';
    p = p.slice(2);
  }
  const labels = p.split('.').map((label) => {
    if (label === '*') return '[^.]+';
    // only a label with non-ASCII characters needs punycode; domainToASCII would
    // read an all-digit label as an IPv4 address ('127' -> '0.0.0.127')
    const ascii = /\P{ASCII}/u.test(label) && !label.includes('*') ? domainToASCII(label) || label : label;
    return ascii
      .split('*')
      .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('[^.]*');
  });
  return new RegExp(`^${prefix}${labels.join('\\.')}$`);
}

function compile(pattern: string): Compiled {
  let c = cache.get(pattern);
  if (c) return c;
  const p = normalizeHost(pattern.trim());
  if (p.includes('/')) {
    const r = parseRange(p);
    c = 'problem' in r ? { kind: 'invalid' } : { kind: 'range', range: r };
  } else {
    const bits = literalBits(p);
    c = bits !== undefined ? { kind: 'range', range: { bits, prefix: 128 } } : { kind: 'name', re: compileName(p) };
  }
  cache.set(pattern, c);
  return c;
}

function inRange(bits: bigint, r: Range): boolean {
  const shift = BigInt(128 - r.prefix);
  return bits >> shift === r.bits >> shift;
}

/** Why a pattern cannot be used (checked when the keys file is loaded), or undefined when it can. */
export function allowedDomainProblem(pattern: string): string | undefined {
  const p = normalizeHost(pattern.trim());
  if (p.includes('/')) {
    const r = parseRange(p);
    return 'problem' in r ? r.problem : undefined;
  }
  if (p.includes('*') && /^[\d.*]+$/.test(p) && /\d/.test(p)) {
    return `'${pattern}': wildcards do not match IP addresses; use a CIDR range such as 10.0.0.0/8`;
  }
  return undefined;
}

export function hostAllowed(host: string, patterns: readonly string[]): boolean {
  if (patterns.length === 0) return true;
  const h = normalizeHost(host);
  const bits = literalBits(h);
  return patterns.some((p) => {
    if (p.trim() === '*') return true;
    const c = compile(p);
    if (c.kind === 'range') return bits !== undefined && inRange(bits, c.range);
    return c.kind === 'name' && bits === undefined && c.re.test(h);
  });
}
