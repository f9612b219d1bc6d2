// GET /v1/sessions/{session_id}/cdp: the Chrome DevTools Protocol WebSocket of a
// browser session, for unmodified clients (puppeteer.connect({browserWSEndpoint}),
// chromium.connectOverCDP(url)). Authenticated by X-Service-Token (both clients can
// set headers) or by `?ticket=` (POST /v1/sessions or /v1/sessions/{id}/connect), so
// the tenant's token is never in a URL. Any replica relays to any live session.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { ServiceError, forbidden, notFound } from '../errors.ts';
import { headerTenant, refuseUpgrade } from '../http/upgrade.ts';
import { openCdpStream } from '../planes/index.ts';
import { relay } from '../sessions/relay.ts';
import { redeemConnectTicket } from '../sessions/tickets.ts';
import { SESSION_ID } from '../sessions/records.ts';
import type { Services } from '../services.ts';

/** How a replica that does not own a session reaches its agent: the fleet's shared secret and CA. */
export const fleetOf = (s: Services): { secret: string | undefined; ca?: Buffer } => ({ secret: s.config.planeSecret, ca: s.fleet()?.ca });

export const CDP_PATH = /^\/v1\/sessions\/([^/]{1,64})\/cdp\/?$/;
/** CDP messages a client sends may carry large scripts; the agent holds them to the same cap. */
export const MAX_CDP_MESSAGE_BYTES = 16 * 1024 * 1024;

let wss: WebSocketServer | undefined;
const server = (): WebSocketServer => (wss ??= new WebSocketServer({ noServer: true, maxPayload: MAX_CDP_MESSAGE_BYTES, perMessageDeflate: false }));

export function cdpUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, s: Services, sessionId: string, url: URL): void {
  void (async () => {
    if (!SESSION_ID.test(sessionId)) throw notFound('no such session');
    let tenant = await headerTenant(req, s);
    if (!tenant) {
      const ticket = url.searchParams.get('ticket');
      if (!ticket) throw new ServiceError('unauthenticated', 'missing X-Service-Token header or ?ticket= (POST /v1/sessions/{session_id}/connect issues one)');
      const tenantId = await redeemConnectTicket(s.state.atomic, ticket, sessionId);
      tenant = (await s.tenants.resolveById(tenantId)) ?? undefined;
      if (!tenant) throw new ServiceError('unauthenticated', 'the ticket tenant no longer exists');
    }
    if (!tenant.scopes.includes('run')) throw forbidden("this token lacks the 'run' scope");
    const record = await s.sessions.get(tenant, sessionId);
    if (record.status === 'ended') throw new ServiceError('conflict', `the session ended (${record.end_reason}): ${record.detail ?? ''}`.trim());
    const endpoint = s.sessions.endpointOf(record, fleetOf(s));
    if (record.status !== 'live' || !endpoint) throw new ServiceError('unavailable', 'the session is still starting; retry shortly', { 'Retry-After': '1' });
    server().handleUpgrade(req, socket, head, (ws: WebSocket) => {
      const stream = openCdpStream({ url: endpoint.url, secret: endpoint.secret, ca: endpoint.ca, token: endpoint.token });
      let detach = (): void => undefined;
      // a shutdown closes the relays of sessions this replica does not own too (its own end with them)
      const stop = (): void => close('the gateway is shutting down');
      const close = relay(ws, stream, {
        closed: () => {
          s.watchers.delete(stop);
          detach();
        },
      });
      s.watchers.add(stop);
      detach = s.sessions.attach(record, close);
    });
  })().catch((err: unknown) => refuseUpgrade(socket, err));
}
