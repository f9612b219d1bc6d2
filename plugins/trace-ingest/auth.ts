// Credentials of the ingest service: scrypt password hashes, DSN keys hashed
// at rest (sha256 of a 256-bit random key), signed session cookies and a
// login limiter.
import { createHash, createHmac, randomBytes, scrypt as scryptCb, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';

const scrypt = promisify(scryptCb) as (password: string, salt: Buffer, keylen: number, opts: { N: number; r: number; p: number; maxmem: number }) => Promise<Buffer>;
const N = 16384;
const R = 8;
const P = 1;

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scrypt(password, salt, 32, { N, r: R, p: P, maxmem: 64 * 1024 * 1024 });
  return `scrypt$${N}$${R}$${P}$${salt.toString('base64url')}$${hash.toString('base64url')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const got = await scrypt(password, Buffer.from(salt, 'base64url'), expected.length, { N: Number(n), r: Number(r), p: Number(p), maxmem: 64 * 1024 * 1024 });
  return got.length === expected.length && timingSafeEqual(got, expected);
}

/** A hash a wrong email is checked against, so an unknown user costs the same time as a wrong password. */
export const DUMMY_HASH = 'scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';

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
}

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
    for (const k of keys) this.failures.set(k, [...(this.failures.get(k) ?? []), now]);
    if (this.failures.size > 100_000) this.failures.clear();
  }

  succeed(keys: string[]): void {
    for (const k of keys) this.failures.delete(k);
  }
}
