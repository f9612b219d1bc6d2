// Single-use, short-lived tickets for what a browser cannot authenticate with a
// header: a WebSocket (offered as the subprotocol `runplane.ticket.<ticket>`)
// and an EventSource (`?ticket=<ticket>` on an SSE route). A ticket names its
// tenant only; the tenant's current configuration (scopes) is read when it is
// redeemed, and redeeming deletes it, so it opens one stream at most. Tickets
// live in the shared store, so any replica redeems one any replica issued.
import { randomBytes } from 'node:crypto';
import { ServiceError } from '../errors.ts';
import type { Services } from '../services.ts';
import type { Tenant } from './tenants.ts';

export const TICKET_TTL_MS = 30_000;
const TICKET = /^[A-Za-z0-9_-]{32}$/;

export async function issueTicket(s: Services, tenantId: string): Promise<string> {
  const ticket = randomBytes(24).toString('base64url');
  await s.state.atomic.put(`ws-ticket:${ticket}`, tenantId, TICKET_TTL_MS);
  return ticket;
}

/** The tenant of a ticket, which is used up; 401 when it is unknown, used or expired. */
export async function redeemTicket(s: Services, ticket: string): Promise<Tenant> {
  if (!TICKET.test(ticket)) throw new ServiceError('unauthenticated', 'ticket unknown, used or expired');
  const key = `ws-ticket:${ticket}`;
  const tenantId = await s.state.atomic.get(key);
  // single use: only the caller that deletes it may use it
  if (!tenantId || !(await s.state.atomic.deleteIf(key, tenantId))) throw new ServiceError('unauthenticated', 'ticket unknown, used or expired');
  const tenant = await s.tenants.resolveById(tenantId);
  if (!tenant) throw new ServiceError('unauthenticated', 'ticket tenant no longer exists');
  return tenant;
}
