// Credentials of the ingest service: scrypt password hashes (rehashed at login
// when their parameters are outdated), DSN keys hashed
// at rest (sha256 of a 256-bit random key), signed session cookies and a
// login limiter.
import { createHash, createHmac, randomBytes, scrypt as scryptCb, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';

const scrypt = promisify(scryptCb) as (password: string, salt: Buffer, keylen: number, opts: { N: number; r: number; p: number; maxmem: number }) => Promise<Buffer>;
// OWASP's scrypt parameters (Password Storage Cheat Sheet: N=2^17, r=8, p=1); a hash
// with weaker ones (N=2^14 before 2026-11) is replaced at the next successful login
const N = 2 ** 17;
const R = 8;
const P = 1;
/** scrypt needs 128 * N * r bytes; the cap also bounds what a stored hash may ask for */
const MAXMEM = 256 * 1024 * 1024;

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scrypt(password, salt, 32, { N, r: R, p: P, maxmem: MAXMEM });
  return `scrypt$${N}$${R}$${P}$${salt.toString('base64url')}$${hash.toString('base64url')}`;
}

function parseHash(stored: string): { n: number; r: number; p: number; salt: Buffer; hash: Buffer } | null {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return null;
  const params = { n: Number(n), r: Number(r), p: Number(p) };
  if (![params.n, params.r, params.p].every((x) => Number.isInteger(x) && x > 0) || 128 * params.n * params.r * params.p > MAXMEM) return null;
  return { ...params, salt: Buffer.from(salt, 'base64url'), hash: Buffer.from(hash, 'base64url') };
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const h = parseHash(stored);
  if (!h) return false;
  const got = await scrypt(password, h.salt, h.hash.length, { N: h.n, r: h.r, p: h.p, maxmem: MAXMEM });
  return got.length === h.hash.length && timingSafeEqual(got, h.hash);
}

/** True for a hash made with other parameters than today's: rehash it after a successful login. */
export function needsRehash(stored: string): boolean {
  const h = parseHash(stored);
  return !h || h.n !== N || h.r !== R || h.p !== P;
}

/** A hash a wrong email is checked against (today's parameters), so an unknown user costs the same time as a wrong password. */
export const DUMMY_HASH = `scrypt$${N}$${R}$${P}$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA`;

export const newDsnKey = (): string => `tk_${randomBytes(32).toString('base64url')}`;
export const hashKey = (key: string): string => createHash('sha256').update(key).digest('hex');

/** DSN (our format): <scheme>://<key>@<host>[:port][/<mount prefix>] */
export function formatDsn(baseUrl: string, key: string): string {
  const u = new URL(baseUrl);
  u.username = key;
  u.pathname = u.pathname.replace(/\/+$/, '').replace(/\/api\/v1$/, '');
  return u.href.replace(/\/$/, '');
}

export interface CookieClaims {
  /** user id, or a tenant id for the override cookie */
  sub: string;
  exp: number;
  /** the login session's id: logout revokes it on the server, so a copied cookie dies with it */
  sid?: string;
}

export const newSessionId = (): string => randomBytes(16).toString('base64url');

export function signCookie(secret: string, claims: CookieClaims): string {
  const body = Buffer.from(JSON.stringify(claims)).toString('base64url');
  return `${body}.${createHmac('sha256', secret).update(body).digest('base64url')}`;
}

export function verifyCookie(secret: string, value: string | undefined, now = Date.now()): CookieClaims | null {
  if (!value) return null;
  const [body, sig] = value.split('.');
  if (!body || !sig) return null;
  const want = createHmac('sha256', secret).update(body).digest();
  const got = Buffer.from(sig, 'base64url');
  if (got.length !== want.length || !timingSafeEqual(got, want)) return null;
  try {
    const claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as CookieClaims;
    if (typeof claims.sub !== 'string' || typeof claims.exp !== 'number' || claims.exp * 1000 <= now) return null;
    if (claims.sid !== undefined && typeof claims.sid !== 'string') return null;
    return claims;
  } catch {
    return null;
  }
}

/**
 * Failed logins per key in a sliding window; over the limit the key waits.
 * Keys are `email:<address>` (maxFailures) and `addr:<client address>`
 * (ten times as many, so one guesser behind a shared address does not lock out the rest).
 */
export class LoginLimiter {
  private readonly failures = new Map<string, number[]>();

  constructor(
    readonly maxFailures = 10,
    readonly windowMs = 15 * 60_000,
    /** keys remembered at most (a spray of addresses must not grow memory without bound) */
    readonly maxKeys = 100_000,
  ) {}

  private limit(key: string): number {
    return key.startsWith('addr:') ? this.maxFailures * 10 : this.maxFailures;
  }

  /** seconds to wait, or 0 */
  retryAfter(keys: string[], now = Date.now()): number {
    let wait = 0;
    for (const k of keys) {
      const list = (this.failures.get(k) ?? []).filter((t) => now - t < this.windowMs);
      this.failures.set(k, list);
      if (list.length >= this.limit(k)) wait = Math.max(wait, Math.ceil((list[0]! + this.windowMs - now) / 1000));
    }
    return wait;
  }

  fail(keys: string[], now = Date.now()): void {
    for (const k of keys) {
      // re-inserted, so the map's order is least recently failed first
      const list = [...(this.failures.get(k) ?? []), now].filter((t) => now - t < this.windowMs);
      this.failures.delete(k);
      this.failures.set(k, list);
    }
    // bounded memory without forgetting the keys under attack: past the cap, drop expired windows, then
    // the keys with the fewest failures (a spray of fresh addresses has one each; the target has many),
    // down to 90% of the cap so the sort runs once per tenth of it
    if (this.failures.size > this.maxKeys) {
      for (const [k, list] of this.failures) if (list.every((t) => now - t >= this.windowMs)) this.failures.delete(k);
      const excess = this.failures.size - Math.floor(this.maxKeys * 0.9);
      if (excess > 0) {
        const ranked = [...this.failures].filter(([k]) => !keys.includes(k)).sort((a, b) => a[1].length - b[1].length || a[1].at(-1)! - b[1].at(-1)!);
        for (const [k] of ranked.slice(0, excess)) this.failures.delete(k);
      }
    }
  }

  succeed(keys: string[]): void {
    for (const k of keys) this.failures.delete(k);
  }
}
