// The query of GET /runs: `limit` 1-500 (default 100; 500 was the cap before
// paging, and the viewer asks for 200) and an opaque `cursor` from the previous
// page's next_cursor, in the gateway's cursor format (GET /v1/runs). Anything
// else is 400 {detail} naming the parameter, never a clamp or a 500.
import { IngestError } from './http.ts';
import type { RunsAfter } from './meta/store.ts';

export const RUNS_LIMIT_MAX = 500;
export const RUNS_LIMIT_DEFAULT = 100;

export function runsQuery(q: Record<string, string>): { limit: number; after?: RunsAfter } {
  const raw = q.limit;
  let limit = RUNS_LIMIT_DEFAULT;
  if (raw !== undefined && raw !== '') {
    limit = /^\d{1,4}$/.test(raw) ? Number(raw) : NaN;
    if (!(limit >= 1 && limit <= RUNS_LIMIT_MAX)) throw new IngestError(400, `limit: must be an integer from 1 to ${RUNS_LIMIT_MAX}`);
  }
  if (q.cursor === undefined || q.cursor === '') return { limit };
  const after = decodeRunsCursor(q.cursor);
  if (!after) throw new IngestError(400, 'cursor: is not one this service made (use next_cursor of the previous page)');
  return { limit, after };
}

/** The key a cursor holds, or null when it is not one runsCursor made (a plugin may not import the gateway's decoder). */
function decodeRunsCursor(cursor: string): RunsAfter | null {
  if (cursor.length > 600 || !/^[A-Za-z0-9_-]+$/.test(cursor)) return null;
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (!Array.isArray(v) || v.length !== 2 || typeof v[0] !== 'string' || typeof v[1] !== 'string') return null;
    // an ISO time and a bounded id, as this service writes them
    if (!/^\d{4}-\d{2}-\d{2}T[\d:.]+Z$/.test(v[0]) || v[1].length === 0 || v[1].length > 300) return null;
    return { created_at: v[0], run_id: v[1] };
  } catch {
    return null;
  }
}

/** The next page's cursor: after this run (the gateway's format: base64url of [created_at, run_id]). */
export const runsCursor = (last: RunsAfter): string => Buffer.from(JSON.stringify([last.created_at, last.run_id])).toString('base64url');
