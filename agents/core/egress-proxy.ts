// The agent's egress guard: an in-process forwarding proxy (plain HTTP and CONNECT)
// that the session's Chromium is launched with, so every request the browser makes
// (navigations, redirects, subresources, popups) leaves through one checkpoint. Each
// target name is resolved once, refused when any answer is not globally reachable
// (private, loopback, link-local, metadata, documentation and the other special-purpose
// ranges, or one of the host's own addresses: shared/egress.ts), and the connection goes to the checked
// address, so a DNS answer that changes in between (rebinding) cannot slip past. When
// the session has an upstream proxy_server, the connection is chained to it instead.
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { BlockList, connect, isIPv6, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { once } from 'node:events';
import { canonicalHost, EgressRefused, resolvePublic } from '../../shared/egress.ts';
import { hostAllowed } from '../../shared/allowed-domains.ts';
import { flag } from './flags.ts';

export interface EgressBlock {
  host: string;
  address: string;
  at_ms: number;
  /** what refused it: a private address, or a host outside the tenant's allowed_domains */
  why: 'private_network' | 'allowed_domains';
}

export interface EgressSettings {
  /** true: private networks are reachable (tests with loopback fixtures, trusted setups). */
  allowPrivate: boolean;
  /** The session's proxy_server (http://[user:pass@]host:port or host:port), or null. */
  upstream: string | null;
  /** The tenant's allowed_domains (shared/allowed-domains.ts); empty: no restriction. */
  allowedDomains?: readonly string[];
}

/** The reason a host outside the tenant's list is refused with (the page, the agent's 403 and the runner's step data). */
export const OFF_LIST_REASON = "outside the tenant's allowed_domains";

interface Upstream {
  host: string;
  port: number;
  auth: string | undefined;
}

function parseUpstream(raw: string | null): Upstream | undefined {
  if (!raw) return undefined;
  const u = new URL(/^[a-z0-9+.-]+:\/\//i.test(raw) ? raw : `http://${raw}`);
  if (u.protocol !== 'http:') throw new Error('only http:// upstream proxies can be chained behind the egress guard');
  const auth = u.username ? `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64')}` : undefined;
  return { host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port || 80), auth };
}

const HOP_HEADERS = ['proxy-connection', 'proxy-authorization', 'connection', 'keep-alive', 'te', 'trailer', 'upgrade'];

/** A host the tenant's allowed_domains do not hold: refused before any DNS lookup. */
class OffList {
  constructor(readonly host: string) {}
}

function blockedPage(host: string, refusal: EgressRefused | OffList): string {
  const esc = (s: string): string => s.replace(/[<>&"]/g, (c) => `&#${c.charCodeAt(0)};`);
  const why =
    refusal instanceof OffList
      ? `${esc(host)} is ${OFF_LIST_REASON}: this run may not leave them.`
      : `${esc(host)} (${esc(refusal.address)}) is not a globally reachable address: ${esc(refusal.reason)}.
This plane agent does not reach private networks (PLANE_ALLOW_PRIVATE_NETWORKS / allow_private_networks).`;
  return `<!doctype html><html><head><meta charset="utf-8"><title>Blocked by the egress guard</title></head>
<body><h1>Blocked by the egress guard</h1><p>${why}</p></body></html>`;
}

/** Addresses a connect() reaches this host's loopback listeners through (0.0.0.0 and :: included). */
const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addSubnet('0.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');
LOOPBACK.addAddress('::', 'ipv6');
LOOPBACK.addSubnet('::ffff:127.0.0.0', 104, 'ipv6');
LOOPBACK.addSubnet('::ffff:0.0.0.0', 104, 'ipv6');

function isLoopbackAddress(address: string): boolean {
  try {
    return LOOPBACK.check(address, isIPv6(address) ? 'ipv6' : 'ipv4');
  } catch {
    return false;
  }
}

/** The header on the proxy's own answers that says what failed, in Chromium's net error names. */
export const EGRESS_HEADER = 'x-runplane-egress';

/** Chromium's name for a socket error met while connecting to the target. */
export function netErrorOf(err: unknown): string {
  switch ((err as NodeJS.ErrnoException)?.code) {
    case 'ECONNREFUSED':
      return 'ERR_CONNECTION_REFUSED';
    case 'ECONNRESET':
      return 'ERR_CONNECTION_RESET';
    case 'ETIMEDOUT':
      return 'ERR_CONNECTION_TIMED_OUT';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'ERR_ADDRESS_UNREACHABLE';
    default:
      return 'ERR_CONNECTION_FAILED';
  }
}

/** A connection the proxy could not make for the browser: the target's host and Chromium's name for why. */
export interface EgressFailure {
  host: string;
  code: string;
  at_ms: number;
}

export class EgressProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Duplex>();
  private settings: EgressSettings = { allowPrivate: false, upstream: null, allowedDomains: [] };
  /** loopback ports no page may reach whatever the policy: the browser's own debugging port */
  private readonly protectedPorts: Array<Promise<number>> = [];
  private upstream: Upstream | undefined;
  port = 0;
  lastBlocked: EgressBlock | null = null;
  blockedCount = 0;
  /** The last target the proxy could not reach (a tunnel's failure reaches Chromium only as ERR_TUNNEL_CONNECTION_FAILED). */
  lastFailure: EgressFailure | null = null;

  private failed(host: string, code: string): string {
    this.lastFailure = { host, code, at_ms: Date.now() };
    return code;
  }

  /** What GET /health shows while the session is bound. */
  status(): Record<string, unknown> {
    return { allow_private: this.settings.allowPrivate, chained: Boolean(this.upstream), blocked_count: this.blockedCount, last_blocked: this.lastBlocked, last_failure: this.lastFailure };
  }

  /** Sets the policy of the session the proxy serves (a pooled proxy gets it at init). */
  configure(s: EgressSettings): void {
    this.upstream = parseUpstream(s.upstream);
    this.settings = s;
    this.lastBlocked = null;
    this.blockedCount = 0;
    this.lastFailure = null;
  }

  /**
   * Between two sessions of a reused browser: back to the unconfigured policy, and every
   * connection of the session before cut (an open tunnel must not carry over).
   */
  reset(): void {
    for (const s of this.sockets) s.destroy();
    this.configure({ allowPrivate: false, upstream: null, allowedDomains: [] });
  }

  /**
   * Refuses connections to loopback:`port` from now on, allowPrivate or not: the browser's
   * debugging port (its browser-wide CDP) must not be reachable from a page it loads. Kept
   * across reset() (the same browser serves the next session).
   */
  protectLoopbackPort(port: Promise<number>): void {
    port.catch(() => undefined);
    this.protectedPorts.push(port);
  }

  private async isProtected(address: string, port: number): Promise<boolean> {
    if (this.protectedPorts.length === 0 || !isLoopbackAddress(address)) return false;
    const ports = await Promise.all(this.protectedPorts.map((p) => p.catch(() => 0)));
    return ports.includes(port);
  }

  /** Chromium flags that send all of the browser's traffic, loopback included, through here. */
  chromeFlags(): string[] {
    return [`--proxy-server=http://127.0.0.1:${this.port}`, '--proxy-bypass-list=<-loopback>', '--force-webrtc-ip-handling-policy=disable_non_proxied_udp'];
  }

  async start(): Promise<void> {
    const server = createServer((req, res) => void this.onRequest(req, res));
    server.on('connect', (req: IncomingMessage, sock: Duplex, head: Buffer) => void this.onConnect(req, sock, head));
    server.on('connection', (s: Socket) => this.track(s));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const addr = server.address();
    this.port = typeof addr === 'object' && addr ? addr.port : 0;
    this.server = server;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    if (server) await new Promise<void>((r) => server.close(() => r()));
  }

  private track(s: Duplex): void {
    this.sockets.add(s);
    s.once('close', () => this.sockets.delete(s));
    s.on('error', () => undefined);
  }

  /**
   * What the guard would do with a tunnel to this host now, checked without recording it:
   * `refused`, `unresolved` (a direct guard answers ERR_NAME_NOT_RESOLVED; a chained one lets
   * the upstream resolve, so never), or null when it would connect.
   */
  async verdict(host: string): Promise<'refused' | 'unresolved' | null> {
    if (!this.onList(host)) return 'refused';
    try {
      await resolvePublic(host, this.settings.allowPrivate);
      return null;
    } catch (err) {
      if (err instanceof EgressRefused) return 'refused';
      return this.upstream ? null : 'unresolved';
    }
  }

  /**
   * Why a tunnel to `host` failed, as the browser's page should be told (Chromium reports
   * every tunnel failure as ERR_TUNNEL_CONNECTION_FAILED, and need not ask the proxy again
   * for a tunnel it saw fail, so the log alone may not know): `EGRESS_REFUSED`, the net
   * error the guard met connecting since `sinceMs`, `ERR_NAME_NOT_RESOLVED`, or null.
   */
  async explainTunnel(host: string, sinceMs: number): Promise<string | null> {
    const verdict = this.lastBlocked?.host === host ? 'refused' : await this.verdict(host);
    if (verdict === 'refused') return 'EGRESS_REFUSED';
    const met = this.lastFailure;
    if (met?.host === host && met.at_ms >= sinceMs) return met.code;
    return verdict === 'unresolved' ? 'ERR_NAME_NOT_RESOLVED' : null;
  }

  /** True when the tenant's allowed_domains (if any) hold `host`. */
  onList(host: string): boolean {
    return hostAllowed(canonicalHost(host), this.settings.allowedDomains ?? []);
  }

  /** The address to connect to, or why not (a refusal is recorded, its reason kept for the page). */
  private async check(host: string, port: number): Promise<{ address: string; family: number } | EgressRefused | OffList | 'unresolved'> {
    // the list is judged on the name the browser asked for, before any lookup: nothing about
    // an off-list host leaves the agent, not even a DNS query
    if (!this.onList(host)) {
      this.lastBlocked = { host, address: '', at_ms: Date.now(), why: 'allowed_domains' };
      this.blockedCount += 1;
      return new OffList(host);
    }
    try {
      const found = await resolvePublic(host, this.settings.allowPrivate);
      if (await this.isProtected(found.address, port)) throw new EgressRefused(host, found.address, "the browser's debugging port");
      return found;
    } catch (err) {
      if (err instanceof EgressRefused) {
        this.lastBlocked = { host, address: err.address, at_ms: Date.now(), why: 'private_network' };
        this.blockedCount += 1;
        return err;
      }
      return 'unresolved';
    }
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let target: URL;
    try {
      target = new URL(req.url ?? '');
      if (target.protocol !== 'http:') throw new Error('scheme');
    } catch {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('egress proxy: absolute http:// URL expected');
      return;
    }
    const host = target.hostname.replace(/^\[|\]$/g, '');
    const checked = await this.check(host, Number(target.port || 80));
    if (checked instanceof EgressRefused || checked instanceof OffList) {
      res.writeHead(403, { 'content-type': 'text/html; charset=utf-8', [EGRESS_HEADER]: 'blocked', 'cache-control': 'no-store' });
      res.end(blockedPage(host, checked));
      return;
    }
    if (checked === 'unresolved' && !this.upstream) {
      res.writeHead(502, { 'content-type': 'text/plain', [EGRESS_HEADER]: this.failed(host, 'ERR_NAME_NOT_RESOLVED') }).end(`egress proxy: ${host} did not resolve`);
      return;
    }
    const headers = { ...req.headers };
    for (const h of HOP_HEADERS) delete headers[h];
    const up = this.upstream;
    // Chained: the upstream gets the absolute URL (its exit resolves the name, so geo
    // DNS stays right); direct: connect to the checked address with the original Host.
    const options = up
      ? { host: up.host, port: up.port, path: target.href, headers: up.auth ? { ...headers, 'proxy-authorization': up.auth } : headers }
      : { host: (checked as { address: string }).address, port: Number(target.port || 80), path: `${target.pathname}${target.search}`, headers };
    const out = httpRequest({ ...options, method: req.method }, (ur) => {
      // the upstream proxy refusing our credentials is a proxy failure, not the site's answer
      if (up && ur.statusCode === 407) {
        ur.resume();
        res.writeHead(502, { 'content-type': 'text/plain', [EGRESS_HEADER]: this.failed(host, 'ERR_PROXY_AUTH_REQUESTED') }).end('egress proxy: the upstream proxy refused its credentials (407)');
        return;
      }
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      ur.pipe(res);
    });
    out.on('error', (err) => {
      const code = this.failed(host, up ? 'ERR_PROXY_CONNECTION_FAILED' : netErrorOf(err));
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain', [EGRESS_HEADER]: code }).end(`egress proxy: connection failed (${code})`);
      else res.destroy();
    });
    req.pipe(out);
  }

  private async onConnect(req: IncomingMessage, sock: Duplex, head: Buffer): Promise<void> {
    this.track(sock);
    const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(req.url ?? '');
    // the canonical form (0x7f.1 is 127.0.0.1) is what is checked, dialled and passed upstream
    const host = m?.[1] && canonicalHost(m[1]);
    const port = Number(m?.[2]);
    if (!host || !port || port > 65535) {
      sock.end('HTTP/1.1 400 Bad Request\r\n\r\n');
      return;
    }
    const checked = await this.check(host, port);
    if (checked instanceof EgressRefused || checked instanceof OffList) {
      sock.end('HTTP/1.1 403 Forbidden\r\nX-Runplane-Egress: blocked\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    if (checked === 'unresolved' && !this.upstream) {
      sock.end(`HTTP/1.1 502 Bad Gateway\r\nX-Runplane-Egress: ${this.failed(host, 'ERR_NAME_NOT_RESOLVED')}\r\nContent-Length: 0\r\n\r\n`);
      return;
    }
    const up = this.upstream;
    const remote = up ? connect(up.port, up.host) : connect(port, (checked as { address: string }).address);
    this.track(remote);
    let connected = false;
    remote.once('error', (err) => {
      // before the tunnel is up the browser can still be told why; after, the connection just ends
      if (!connected) sock.end(`HTTP/1.1 502 Bad Gateway\r\nX-Runplane-Egress: ${this.failed(host, up ? 'ERR_PROXY_CONNECTION_FAILED' : netErrorOf(err))}\r\nContent-Length: 0\r\n\r\n`);
      else sock.destroy();
    });
    sock.once('close', () => remote.destroy());
    remote.once('close', () => sock.destroy());
    remote.once('connect', () => {
      connected = true;
      if (up) {
        // Ask the upstream for the tunnel, then splice once it answers 200.
        const auth = up.auth ? `Proxy-Authorization: ${up.auth}\r\n` : '';
        remote.write(`CONNECT ${host.includes(':') ? `[${host}]` : host}:${port} HTTP/1.1\r\nHost: ${host}:${port}\r\n${auth}\r\n`);
        let buf = Buffer.alloc(0);
        const onData = (d: Buffer): void => {
          buf = Buffer.concat([buf, d]);
          const end = buf.indexOf('\r\n\r\n');
          if (end < 0) return;
          remote.off('data', onData);
          const status = /^HTTP\/1\.[01] (\d{3})/.exec(buf.subarray(0, end).toString('latin1'))?.[1] ?? '';
          if (!status.startsWith('2')) {
            const code = status === '407' ? 'ERR_PROXY_AUTH_REQUESTED' : 'ERR_TUNNEL_CONNECTION_FAILED';
            sock.end(`HTTP/1.1 502 Bad Gateway\r\nX-Runplane-Egress: ${this.failed(host, code)}\r\nContent-Length: 0\r\n\r\n`);
            return;
          }
          sock.write('HTTP/1.1 200 Connection Established\r\n\r\n');
          const rest = buf.subarray(end + 4);
          if (rest.length) sock.write(rest);
          if (head.length) remote.write(head);
          remote.pipe(sock);
          sock.pipe(remote);
        };
        remote.on('data', onData);
        return;
      }
      sock.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) remote.write(head);
      remote.pipe(sock);
      sock.pipe(remote);
    });
  }
}

/** The guard's policy for a session: the init's allow_private_networks (else PLANE_ALLOW_PRIVATE_NETWORKS) and the tenant's allowed_domains. */
export function sessionEgress(init: { allow_private_networks: boolean; proxy_server: string | null; allowed_domains?: readonly string[] }, env: NodeJS.ProcessEnv = process.env): EgressSettings {
  return { allowPrivate: init.allow_private_networks || flag(env.PLANE_ALLOW_PRIVATE_NETWORKS, false), upstream: init.proxy_server, allowedDomains: init.allowed_domains ?? [] };
}

/** A started guard for one session (or a pooled browser, configured when it is taken). */
export async function startEgress(settings?: EgressSettings): Promise<EgressProxy> {
  const p = new EgressProxy();
  await p.start();
  if (settings) p.configure(settings);
  return p;
}
