// Reading a DSN and a Retry-After header: what the stream needs from the
// outside world's strings, apart from the stream itself.

export interface ParsedDsn {
  /** .../api/v1 without a trailing slash */
  baseUrl: string;
  key: string;
}

/**
 * DSN format (our choice): `<http|https>://<key>@<host>[:port][/<mount prefix>]`.
 * The key is the userinfo; the API lives at `<origin><prefix>/api/v1`.
 */
export function parseDsn(dsn: string): ParsedDsn {
  let u: URL;
  try {
    u = new URL(dsn);
  } catch {
    throw new Error('TRACE_DSN is not a URL (expected http(s)://<key>@host[:port][/prefix])');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('TRACE_DSN must use http or https');
  const key = decodeURIComponent(u.username);
  if (!key) throw new Error('TRACE_DSN carries no key (expected http(s)://<key>@host[:port][/prefix])');
  const prefix = u.pathname.replace(/\/+$/, '').replace(/\/api\/v1$/, '');
  return { baseUrl: `${u.protocol}//${u.host}${prefix}/api/v1`, key };
}

/** Retry-After as the SDK reads it: integer seconds, 1.0 when missing, an HTTP-date or garbage; clamped to 0..30. */
export function parseRetryAfter(value: string | null | undefined): number {
  const v = value?.trim();
  if (!v || !/^-?\d+$/.test(v)) return 1.0;
  return Math.min(30, Math.max(0, Number(v)));
}
