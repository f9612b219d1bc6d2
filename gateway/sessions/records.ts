// The session record: what the store of record keeps of a browser session a client
// drives over CDP, and the body the API answers with (never the agent's token).
import { randomBytes } from 'node:crypto';
import type { Backend } from '../plugins/contract.ts';

export const SESSION_ID = /^ses_[a-z0-9]{8,40}$/;

export type SessionStatus = 'starting' | 'live' | 'ended';

export type EndReason = 'released' | 'idle_timeout' | 'max_duration' | 'client_disconnected' | 'browser_lost' | 'gateway_lost' | 'shutdown' | 'start_failed';

export interface SessionOptions {
  idle_timeout_seconds: number;
  timeout_seconds: number;
  keep_alive: boolean;
}

export interface SessionRecord extends SessionOptions {
  session_id: string;
  tenant_id: string;
  status: SessionStatus;
  compute_backend: Backend;
  created_at: string;
  updated_at: string;
  expires_at: string;
  ended_at: string | null;
  end_reason: EndReason | null;
  detail: string | null;
  /** tenant-prefixed (tenant/profile), as a run's */
  profile_id: string | null;
  /** the replica that opened the plane and holds it (runs' owner format: pid space, pid, random) */
  owner: string;
  /** where the browser is: the agent slot and the session token (a relay on any replica reaches it); internal */
  endpoint: { url: string; token: string } | null;
  /** the plane kept a recording, written at the end */
  video: boolean;
}

export function newSessionId(): string {
  return `ses_${randomBytes(16).toString('hex')}`;
}

/** The store key: tenant first, so a tenant's listing reads only its own rows. */
export function sessionKey(tenantId: string, sessionId: string): string {
  return `${tenantId}/${sessionId}`;
}

/** The body the API answers with: no token, no owner; the CDP URL on the gateway that answered. */
export function sessionBody(r: SessionRecord, base: string) {
  const id = encodeURIComponent(r.session_id);
  return {
    session_id: r.session_id,
    status: r.status,
    compute_backend: r.compute_backend,
    created_at: r.created_at,
    updated_at: r.updated_at,
    expires_at: r.expires_at,
    ended_at: r.ended_at,
    end_reason: r.end_reason,
    detail: r.detail,
    idle_timeout_seconds: r.idle_timeout_seconds,
    timeout_seconds: r.timeout_seconds,
    keep_alive: r.keep_alive,
    profile_id: r.profile_id ? r.profile_id.slice(r.tenant_id.length + 1) : null,
    cdp_url: `${base.replace(/^http/, 'ws')}/v1/sessions/${id}/cdp`,
    live_url: `${base}/ui/#/sessions/${id}`,
    video_url: r.status === 'ended' && r.video ? `${base}/v1/sessions/${id}/video` : null,
    trace_url: r.status === 'ended' ? `${base}/v1/sessions/${id}/trace` : null,
  };
}

export type SessionBody = ReturnType<typeof sessionBody>;

/** Newest first; the cursor is the last item's (created_at, id). */
export function pageSessions(rows: SessionRecord[], limit: number, cursor: string | undefined): { items: SessionRecord[]; next_cursor: string | null } {
  const newest = (a: SessionRecord, b: SessionRecord): number => (a.created_at === b.created_at ? (a.session_id < b.session_id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1);
  let after: { created_at: string; session_id: string } | undefined;
  if (cursor) {
    try {
      const [created_at, session_id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as [string, string];
      if (typeof created_at === 'string' && typeof session_id === 'string') after = { created_at, session_id };
    } catch {
      after = undefined;
    }
    if (!after) return { items: [], next_cursor: null };
  }
  const sorted = rows.sort(newest).filter((r) => !after || newest(r, { ...r, ...after }) > 0);
  const items = sorted.slice(0, limit);
  const last = items[items.length - 1];
  return { items, next_cursor: sorted.length > limit && last ? Buffer.from(JSON.stringify([last.created_at, last.session_id])).toString('base64url') : null };
}
