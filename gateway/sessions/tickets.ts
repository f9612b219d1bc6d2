// Connect tickets: for CDP clients that cannot set a header (a URL is all
// `chromium.connectOverCDP` or a browser-use config takes), the session's URL
// carries `?ticket=`: single use, 60 seconds, bound to one session of one tenant,
// never the tenant's token. They live in the shared store, so any replica redeems one.
import { randomBytes } from 'node:crypto';
import { ServiceError } from '../errors.ts';
import type { AtomicOps } from '../state/atomic.ts';

export const CONNECT_TICKET_TTL_MS = 60_000;
const TICKET = /^[A-Za-z0-9_-]{32}$/;

export async function issueConnectTicket(atomic: AtomicOps, tenantId: string, sessionId: string): Promise<string> {
  const ticket = randomBytes(24).toString('base64url');
  await atomic.put(`cdp-ticket:${ticket}`, `${tenantId}\n${sessionId}`, CONNECT_TICKET_TTL_MS);
  return ticket;
}

/** The tenant id the ticket was issued to, once (redeeming deletes it); 401 when unknown, used, expired or for another session. */
export async function redeemConnectTicket(atomic: AtomicOps, ticket: string, sessionId: string): Promise<string> {
  const refused = new ServiceError('unauthenticated', 'connect ticket unknown, used, expired or for another session');
  if (!TICKET.test(ticket)) throw refused;
  const key = `cdp-ticket:${ticket}`;
  const value = await atomic.get(key);
  if (!value || !(await atomic.deleteIf(key, value))) throw refused;
  const [tenantId, forSession] = value.split('\n');
  if (!tenantId || forSession !== sessionId) throw refused;
  return tenantId;
}

/**
 * Live screen tickets (GET /v1/sessions/{id}/live from a browser): single use, 30
 * seconds, bound to one session of one tenant and to what the token that asked may
 * do there (watch, or control with the operator scope), since a ticket that named only
 * the tenant would be redeemed with another of its tokens' scopes.
 */
export const LIVE_TICKET_TTL_MS = 30_000;

export async function issueLiveTicket(atomic: AtomicOps, tenantId: string, sessionId: string, control: boolean): Promise<string> {
  const ticket = randomBytes(24).toString('base64url');
  await atomic.put(`live-ticket:${ticket}`, `${tenantId}\n${sessionId}\n${control ? 'control' : 'watch'}`, LIVE_TICKET_TTL_MS);
  return ticket;
}

/** The tenant and the mode the ticket was issued for, once; 401 when unknown, used, expired or for another session. */
export async function redeemLiveTicket(atomic: AtomicOps, ticket: string, sessionId: string): Promise<{ tenantId: string; control: boolean }> {
  const refused = new ServiceError('unauthenticated', 'live ticket unknown, used, expired or for another session');
  if (!TICKET.test(ticket)) throw refused;
  const key = `live-ticket:${ticket}`;
  const value = await atomic.get(key);
  if (!value || !(await atomic.deleteIf(key, value))) throw refused;
  const [tenantId, forSession, mode] = value.split('\n');
  if (!tenantId || forSession !== sessionId) throw refused;
  return { tenantId, control: mode === 'control' };
}
