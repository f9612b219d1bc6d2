// Identifiers and paths that become file names or object keys: one safe id
// pattern (run ids, debug session ids, side-effect ids, ingest tenant ids),
// one rule for bundle-relative paths, and containment checks for resolved
// file paths and object keys. Used by the capture SDK (sdk/), the trace-ingest
// service (plugins/trace-ingest/) and the gateway's trace file route.
import path from 'node:path';

/** Longest safe id, in characters. */
export const SAFE_ID_MAX = 128;

/**
 * 1-128 characters: a letter or digit first, then letters, digits and
 * `. _ ~ : -`. So never `.` or `..`, no `/`, `\`, `%`, whitespace, NUL or other
 * control characters. Covers UUIDs, `dbg_<hex>`, `se_<hex>` and branch run ids
 * `<parent_run_id>:branch:<hex>`. The trace schemas declare the same pattern
 * (common.schema.json, $defs SafeId).
 */
export const SAFE_ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._~:-]{0,127}$';
export const SAFE_ID_RE = new RegExp(SAFE_ID_PATTERN);

/** Longest bundle-relative path, in characters. */
export const BUNDLE_PATH_MAX = 1024;

/** A refused id or path; `detail` is safe to show a client (it never echoes the value). */
export class UnsafeIdError extends Error {
  override name = 'UnsafeIdError';
}

export const isSafeId = (value: unknown): value is string => typeof value === 'string' && SAFE_ID_RE.test(value);

/** null when value is a safe id, else why not (naming `what`, never echoing the value). */
export function idProblem(what: string, value: unknown): string | null {
  if (typeof value !== 'string' || value === '') return `${what} is required (a string of 1-${SAFE_ID_MAX} characters)`;
  if (value.length > SAFE_ID_MAX) return `${what} is longer than the cap of ${SAFE_ID_MAX} characters`;
  if (!SAFE_ID_RE.test(value)) return `${what} must be 1-${SAFE_ID_MAX} of letters, digits and . _ ~ : - starting with a letter or digit`;
  return null;
}

/** value when it is a safe id; else throws UnsafeIdError. */
export function checkId(what: string, value: unknown): string {
  const problem = idProblem(what, value);
  if (problem) throw new UnsafeIdError(problem);
  return value as string;
}

// control characters (C0, DEL, C1), backslash and percent: a bundle path holds none
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const BAD_PATH_CHARS = /[\u0000-\u001f\u007f-\u009f\\%]/;

/**
 * null when rel is a bundle-relative file path: `/`-separated segments, none
 * empty, `.` or `..`, no leading `/`, no backslash, no percent sign (so an
 * already-decoded path cannot carry another layer of encoding), no control
 * character, at most BUNDLE_PATH_MAX characters. Else why not.
 */
export function bundlePathProblem(rel: unknown): string | null {
  if (typeof rel !== 'string' || rel === '') return 'a bundle path is required';
  if (rel.length > BUNDLE_PATH_MAX) return `a bundle path is longer than the cap of ${BUNDLE_PATH_MAX} characters`;
  if (BAD_PATH_CHARS.test(rel)) return 'a bundle path may not hold backslashes, percent signs or control characters';
  if (rel.split('/').some((s) => s === '' || s === '.' || s === '..')) return 'a bundle path may not be absolute or hold empty, . or .. segments';
  return null;
}

/** rel when it is a bundle-relative file path; else throws UnsafeIdError("invalid bundle path: ..."). */
export function checkBundlePath(rel: unknown): string {
  const problem = bundlePathProblem(rel);
  if (problem) throw new UnsafeIdError(`invalid bundle path: ${problem}`);
  return rel as string;
}

/** root joined with parts, refused unless the result lies strictly inside root (path.resolve plus a prefix check with the separator). */
export function resolveInside(root: string, ...parts: string[]): string {
  const base = path.resolve(root);
  const full = path.resolve(base, ...parts);
  if (!full.startsWith(base.endsWith(path.sep) ? base : base + path.sep)) throw new UnsafeIdError('a path leaves its directory');
  return full;
}

/**
 * A `/`-separated object-key prefix with no empty, `.` or `..` segment, no
 * backslash and no control character (a percent sign is allowed: the keys of
 * ids stored encoded carry one). '' is the bucket root.
 */
export function checkKeyPrefix(prefix: string): string {
  // eslint-disable-next-line no-control-regex -- matching control characters is the point
  if (prefix !== '' && (/[\u0000-\u001f\u007f-\u009f\\]/.test(prefix) || prefix.split('/').some((s) => s === '' || s === '.' || s === '..'))) {
    throw new UnsafeIdError('an object key prefix may not hold empty, . or .. segments, backslashes or control characters');
  }
  return prefix;
}

/** prefix + '/' + rel, refused unless it stays under prefix. */
export function keyInside(prefix: string, rel: string): string {
  const key = [checkKeyPrefix(prefix), checkBundlePath(rel)].filter(Boolean).join('/');
  if (prefix && !key.startsWith(`${prefix}/`)) throw new UnsafeIdError('an object key leaves its prefix');
  return key;
}
