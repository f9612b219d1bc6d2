// allowed_domains matching. A pattern is a host name, optionally with `*`
// wildcards: a leading `*.` matches one or more labels and never the apex
// (`*.example.com` matches a.example.com and a.b.example.com, not example.com;
// list both to allow both); any other `*` matches within one label; `*` alone
// matches every host. Case-insensitive, trailing dots ignored, IDNs compared
// in their ASCII (punycode) form, ports ignored.
import { domainToASCII } from 'node:url';

const cache = new Map<string, RegExp>();

function normalizeHost(host: string): string {
  return host.toLowerCase().replace(/\.$/, '');
}

function compile(pattern: string): RegExp {
  let re = cache.get(pattern);
  if (re) return re;
  let p = normalizeHost(pattern.trim());
  let prefix = '';
  if (p.startsWith('*.')) {
    prefix = '(?:[^.]+\\.)+';
    p = p.slice(2);
  }
  const labels = p.split('.').map((label) => {
    if (label === '*') return '[^.]+';
    const ascii = label.includes('*') ? label : domainToASCII(label) || label;
    return ascii
      .split('*')
      .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('[^.]*');
  });
  re = new RegExp(`^${prefix}${labels.join('\\.')}$`);
  cache.set(pattern, re);
  return re;
}

export function hostAllowed(host: string, patterns: readonly string[]): boolean {
  if (patterns.length === 0) return true;
  const h = normalizeHost(host);
  return patterns.some((p) => p.trim() === '*' || compile(p).test(h));
}
