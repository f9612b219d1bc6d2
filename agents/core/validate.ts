// Small hand-written checks of the wire records: each failure names the field, so a
// bad call gets a precise 400 instead of a browser error later.
import { resolve, sep } from 'node:path';
import { badRequest } from './errors.ts';
import type { SessionInitRequest } from './types.ts';
import { allowedDomainProblem } from '../../shared/allowed-domains.ts';

export type Body = Record<string, unknown>;

export function asBody(v: unknown): Body {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw badRequest('request body must be a JSON object');
  return v as Body;
}

export function str(b: Body, k: string): string {
  const v = b[k];
  if (typeof v !== 'string' || v.length === 0) throw badRequest(`${k} must be a non-empty string`);
  return v;
}

export function optStr(b: Body, k: string): string | undefined {
  const v = b[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw badRequest(`${k} must be a string`);
  return v;
}

export function optNum(b: Body, k: string): number | undefined {
  const v = b[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw badRequest(`${k} must be a finite number`);
  return v;
}

export function optInt(b: Body, k: string, min: number, max: number): number | undefined {
  const v = optNum(b, k);
  if (v === undefined) return undefined;
  if (!Number.isInteger(v) || v < min || v > max) throw badRequest(`${k} must be an integer in [${min}, ${max}]`);
  return v;
}

export function optBool(b: Body, k: string): boolean | undefined {
  const v = b[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw badRequest(`${k} must be a boolean`);
  return v;
}

export function strArray(b: Body, k: string, maxLen = 256): string[] {
  const v = b[k];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.length > maxLen || !v.every((x) => typeof x === 'string')) {
    throw badRequest(`${k} must be an array of at most ${maxLen} strings`);
  }
  return v as string[];
}

// Ids become directory names under PLANE_DATA_DIR: letters, digits and _ . : @ -,
// never starting with a dot, so `..`, `/` and hidden names cannot be expressed.
const ID_RE = /^[A-Za-z0-9_@:-][A-Za-z0-9_.@:-]{0,127}$/;

export function id(b: Body, k: string): string {
  const v = str(b, k);
  if (!ID_RE.test(v)) throw badRequest(`${k} must be 1-128 of letters, digits, _ . : @ - and not start with a dot`);
  return v;
}

/** The tenant-prefixed profile dir, proven to stay under the data dir. */
export function profileDir(dataDir: string, tenantId: string, profileId: string): string {
  const base = resolve(dataDir, 'profiles');
  const dir = resolve(base, tenantId, profileId);
  if (!dir.startsWith(base + sep)) throw badRequest('profile path escapes the data directory');
  return dir;
}

/** Flags that weaken or switch off Chromium's sandbox: never passed, whoever asks. */
export const SANDBOX_OFF_FLAGS =
  /^--(no-sandbox|disable-seccomp-filter-sandbox|disable-namespace-sandbox|disable-setuid-sandbox|disable-gpu-sandbox|no-zygote|single-process|in-process-gpu)(=|$)/;

// Flags that would hand the browser to someone else, break isolation, start other
// programs in the browser's place or route traffic around the egress guard are refused.
const FORBIDDEN_FLAG =
  /^--(user-data-dir|remote-debugging-port|remote-debugging-address|remote-debugging-pipe|proxy-server|no-proxy-server|proxy-bypass-list|proxy-pac-url|proxy-auto-detect|winhttp-proxy-resolver|host-resolver-rules|host-rules|force-webrtc-ip-handling-policy|renderer-cmd-prefix|utility-cmd-prefix|gpu-launcher|browser-subprocess-path)(=|$)/;

/** proxy_exit: {country: ISO alpha-2, state?: US two-letter, city?: a name}, or absent. */
function parseExit(v: unknown): SessionInitRequest['proxy_exit'] {
  if (v === undefined || v === null) return null;
  const o = v as Record<string, unknown>;
  const two = (x: unknown) => typeof x === 'string' && /^[A-Za-z]{2}$/.test(x);
  if (typeof v !== 'object' || Array.isArray(v) || !two(o.country) || (o.state !== undefined && !two(o.state)) || (o.city !== undefined && (typeof o.city !== 'string' || !/^[\p{L}\p{N} .'_-]{1,64}$/u.test(o.city)))) {
    throw badRequest('proxy_exit must be {country: two letters, state?: two letters, city?: a name of at most 64 characters}');
  }
  return { country: String(o.country).toLowerCase(), ...(o.state !== undefined ? { state: String(o.state).toLowerCase() } : {}), ...(o.city !== undefined ? { city: String(o.city) } : {}) };
}

/** The tenant's allowed_domains: as many entries as a keys file sensibly holds, each a host pattern of DNS length. */
function parseAllowedDomains(b: Body): string[] {
  const list = strArray(b, 'allowed_domains', 1000);
  for (const [i, p] of list.entries()) {
    if (p.trim().length === 0 || p.length > 300) throw badRequest(`allowed_domains[${i}] must be 1-300 characters`);
    const problem = allowedDomainProblem(p);
    if (problem) throw badRequest(`allowed_domains[${i}]: ${problem}`);
  }
  return list;
}

export function parseInit(raw: unknown): SessionInitRequest {
  const b = asBody(raw);
  const flags = strArray(b, 'chrome_flags');
  for (const f of flags) {
    if (!f.startsWith('--')) throw badRequest(`chrome_flags entries must start with --: ${JSON.stringify(f).slice(0, 80)}`);
    if (FORBIDDEN_FLAG.test(f) || SANDBOX_OFF_FLAGS.test(f)) throw badRequest(`chrome flag not allowed: ${f.split('=')[0]}`);
  }
  let viewport: [number, number] = [1280, 720];
  if (b.viewport !== undefined && b.viewport !== null) {
    const v = b.viewport;
    if (!Array.isArray(v) || v.length !== 2 || !v.every((n) => Number.isInteger(n) && n >= 200 && n <= 4096)) {
      throw badRequest('viewport must be [width, height], integers in [200, 4096]');
    }
    viewport = [v[0] as number, v[1] as number];
  }
  const proxy = optStr(b, 'proxy_server');
  // The browser's traffic leaves through the agent's egress guard, which chains to an
  // HTTP proxy; SOCKS upstreams cannot be chained and are refused up front.
  if (proxy !== undefined && proxy !== '' && !/^http:\/\/[^\s/]+(:\d{1,5})?\/?$|^[A-Za-z0-9.-]+:\d{1,5}$/.test(proxy)) {
    throw badRequest('proxy_server must be http://[user:pass@]host:port or host:port (an HTTP proxy)');
  }
  return {
    proxy_exit: parseExit(b.proxy_exit),
    tenant_id: id(b, 'tenant_id'),
    profile_id: id(b, 'profile_id'),
    run_id: id(b, 'run_id'),
    proxy_server: proxy ? proxy : null,
    chrome_flags: flags,
    enable_cdp: optBool(b, 'enable_cdp') ?? false,
    viewport,
    require_dom_aware: optBool(b, 'require_dom_aware') ?? false,
    allow_private_networks: optBool(b, 'allow_private_networks') ?? false,
    allowed_domains: parseAllowedDomains(b),
    persist_profile: optBool(b, 'persist_profile') ?? true,
    profile_sync: parseProfileSync(b.profile_sync),
    dialogs: dialogPolicy(b),
  };
}

function parseProfileSync(v: unknown): SessionInitRequest['profile_sync'] {
  if (v === undefined || v === null) return null;
  const o = v as Record<string, unknown>;
  const ok = (x: unknown) => x === null || x === undefined || (typeof x === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(x));
  if (typeof v !== 'object' || Array.isArray(v) || !ok(o.upload_id) || !ok(o.version)) {
    throw badRequest('profile_sync must be {upload_id: an upload id or null, version: a version id or null}');
  }
  return { upload_id: (o.upload_id as string | undefined) ?? null, version: (o.version as string | undefined) ?? null };
}

function dialogPolicy(b: Body): 'dismiss' | 'accept' {
  const v = optStr(b, 'dialogs') ?? 'dismiss';
  if (v !== 'dismiss' && v !== 'accept') throw badRequest('dialogs must be dismiss or accept');
  return v;
}
