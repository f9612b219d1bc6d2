// Credentials of the ingest service: scrypt password hashes (rehashed at login
// when their parameters are outdated), DSN keys hashed
// at rest (sha256 of a 256-bit random key) and signed session cookies (the
// login limits are limits.ts').
import { createHash, createHmac, randomBytes, scrypt as scryptCb, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';

const scrypt = promisify(scryptCb) as (password: string, salt: Buffer, keylen: number, opts: { N: number; r: number; p: number; maxmem: number }) => Promise<Buffer>;
// OWASP's scrypt parameters (Password Storage Cheat Sheet: N=2^17, r=8, p=1); a hash
// with weaker ones (N=2^14 before 2026-11) is replaced at the next successful login
export const SCRYPT_N = 2 ** 17;
const R = 8;
const P = 1;
/** scrypt needs 128 * N * r bytes; the cap also bounds what a stored hash may ask for */
const MAXMEM = 256 * 1024 * 1024;

/**
 * The N of new hashes: SCRYPT_N, unless RUNPLANE_TEST_SCRYPT_N, for the test suite only
 * (test/support/hash-cost.ts), asks for a lower power of two (from 2^10). A hash at
 * 2^17 costs half a CPU-second, and the login tests check dozens of passwords; what
 * they test (limits, sessions, rehashing) does not depend on the cost. Read per call:
 * test/trace/password-rehash.test.ts checks the production parameters in the same process.
 */
function currentN(): number {
  const v = process.env.RUNPLANE_TEST_SCRYPT_N;
  if (v === undefined || v === '') return SCRYPT_N;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 2 ** 10 || n > SCRYPT_N || (n & (n - 1)) !== 0) throw new Error(`RUNPLANE_TEST_SCRYPT_N must be a power of two from 1024 to ${SCRYPT_N}, not ${v}`);
  return n;
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const N = currentN();
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
  return !h || h.n !== currentN() || h.r !== R || h.p !== P;
}

/** A hash a wrong email is checked against (today's parameters), so an unknown user costs the same time as a wrong password. */
export const dummyHash = (): string => `scrypt$${currentN()}$${R}$${P}$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA`;

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
