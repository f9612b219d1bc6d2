// Live screens on WebSockets (gateway/takeover/live.ts): GET /v1/sessions/{id}/live
// for a tenant's live browser session, and GET /v1/takeover/{takeover_id}/live for
// the person holding a waiting run's one-time link. A session's screen is watched
// with the status scope and controlled only with the operator scope; a browser
// authenticates with a live ticket (POST /v1/sessions/{id}/live-ticket, bound to the
// session and to watch or control) offered as the subprotocol runplane.ticket.<t>,
// a server with X-Service-Token (`?control=0` watches only). The takeover's socket is
// authenticated by the claim the link's page got when it opened the link, offered as
// runplane.claim.<claim>; the run side (services.takeoverTargets) says what it shows.
// A refused upgrade is a plain HTTP answer with {detail}: 401, 403, 404 (another
// tenant's session, an unknown takeover), 409 for a session that ended.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { ServiceError, badRequest, forbidden, notFound } from '../errors.ts';
import { headerTenant, refuseUpgrade } from '../http/upgrade.ts';
import type { Tenant } from '../http/tenants.ts';
import { SESSION_ID } from '../sessions/records.ts';
import { LIVE_TICKET_TTL_MS, issueLiveTicket, redeemLiveTicket } from '../sessions/tickets.ts';
import { TAKEOVER_ID, TAKEOVER_SECRET } from '../takeover/records.ts';
import { attachLive } from '../takeover/live.ts';
import type { LiveTarget } from '../takeover/live-target.ts';
import type { Services } from '../services.ts';
import type { LiveTicketRequest } from '../../schemas/types.gen.ts';
import { fleetOf } from './cdp.ts';
import { param, type RouteSpec } from './route.ts';

const PROTOCOL = 'runplane.v1';
const TICKET_PREFIX = 'runplane.ticket.';
const CLAIM_PREFIX = 'runplane.claim.';
export const SESSION_LIVE_PATH = /^\/v1\/sessions\/([^/]{1,64})\/live\/?$/;
export const RUN_LIVE_PATH = /^\/v1\/runs\/([^/]{1,64})\/live\/?$/;
export const TAKEOVER_LIVE_PATH = /^\/v1\/takeover\/([^/]{1,64})\/live\/?$/;
/** Sessions' default page size: a session row does not keep its viewport, and the first frame says the real one. */
const DEFAULT_VIEWPORT = { width: 1280, height: 720 };

let wss: WebSocketServer | undefined;
// ws closes a socket only past maxPayload; below it the relay answers an oversized message with an error
const server = (): WebSocketServer => (wss ??= new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024, perMessageDeflate: false, handleProtocols: (p) => (p.has(PROTOCOL) ? PROTOCOL : false) }));

const canWatch = (t: Tenant): boolean => t.scopes.includes('status') || t.scopes.includes('operator');

export const liveRoutes: RouteSpec[] = [
  {
    method: 'POST',
    path: '/v1/sessions/:session_id/live-ticket',
    ok: 'responses.schema.json#/$defs/LiveTicket',
    summary: "A single-use, 30-second ticket for a browser to open a live session's screen (GET /v1/sessions/{session_id}/live, subprotocols runplane.v1 and runplane.ticket.<ticket>): control (mouse, wheel, keys, paste relayed to the page) with the operator scope, else watch only",
    tags: ['sessions'],
    auth: true,
    scope: 'status',
    body: { schema: 'sessions.schema.json#/$defs/LiveTicketRequest' },
    responses: { '403': "control asked by a token without the 'operator' scope", '409': 'the session ended' },
    async handler(ctx, s) {
      const tenant = ctx.state.tenant!;
      const asked = (ctx.state.body as LiveTicketRequest).control;
      const operator = tenant.scopes.includes('operator');
      if (asked === true && !operator) throw forbidden("controlling a session's screen needs the 'operator' scope; this token may watch it only");
      const r = await s.sessions.get(tenant, param(ctx, 'session_id'));
      if (r.status === 'ended') throw new ServiceError('conflict', `the session ended (${r.end_reason})`);
      const control = asked ?? operator;
      const ticket = await issueLiveTicket(s.state.atomic, tenant.tenant_id, r.session_id, control);
      ctx.body = { ticket, expires_in: LIVE_TICKET_TTL_MS / 1000, protocol: [PROTOCOL, `${TICKET_PREFIX}${ticket}`], control };
    },
  },
  {
    method: 'POST',
    path: '/v1/runs/:run_id/live-ticket',
    ok: 'responses.schema.json#/$defs/LiveTicket',
    summary: "A single-use, 30-second ticket for a browser to watch a running run's screen (GET /v1/runs/{run_id}/live, subprotocols runplane.v1 and runplane.ticket.<ticket>). A run's screen is watched only: an operator takes it over with POST /v1/runs/{run_id}/takeover",
    tags: ['runs'],
    auth: true,
    scope: 'status',
    body: { schema: 'sessions.schema.json#/$defs/LiveTicketRequest' },
    responses: { '400': "control asked: a run's screen is watched only", '409': 'the run ended' },
    async handler(ctx, s) {
      const tenant = ctx.state.tenant!;
      if ((ctx.state.body as LiveTicketRequest).control === true) throw badRequest("control: a run's screen is watched only; an operator takes the run over with POST /v1/runs/{run_id}/takeover", 'control');
      const r = await s.runs.get(tenant, param(ctx, 'run_id'));
      if (RUN_ENDED.has(r.status)) throw new ServiceError('conflict', `the run ended (${r.status})`);
      const ticket = await issueLiveTicket(s.state.atomic, tenant.tenant_id, `run:${r.run_id}`, false);
      ctx.body = { ticket, expires_in: LIVE_TICKET_TTL_MS / 1000, protocol: [PROTOCOL, `${TICKET_PREFIX}${ticket}`], control: false };
    },
  },
];

const RUN_ENDED = new Set(['succeeded', 'failed', 'cancelled']);
/** a run id as a key: the runs' store answers 404 for anything else */
const RUN_ID = /^[A-Za-z0-9_.-]{1,64}$/;

function offered(req: IncomingMessage, prefix: string): string | undefined {
  return String(req.headers['sec-websocket-protocol'] ?? '')
    .split(',')
    .map((p) => p.trim())
    .find((p) => p.startsWith(prefix))
    ?.slice(prefix.length);
}

interface OpenOptions {
  onInput?: Parameters<typeof attachLive>[2]['onInput'];
  /** called with the screen's close once it is open; returns what to undo when it closes */
  opened?: (close: (why: string) => void) => () => void;
}

/** Opens the socket and relays it; a shutdown closes it. */
function open(req: IncomingMessage, socket: Duplex, head: Buffer, s: Services, target: LiveTarget, control: boolean, what: Record<string, unknown>, o: OpenOptions = {}): void {
  server().handleUpgrade(req, socket, head, (ws: WebSocket) => {
    const stop = (): void => close('the gateway is shutting down');
    let undo = (): void => undefined;
    // the choice is logged, never an input
    s.log.info({ ...what, control }, 'live screen opened');
    const close = attachLive(ws, target, {
      control,
      ...(o.onInput ? { onInput: o.onInput } : {}),
      onClose: (why) => {
        s.watchers.delete(stop);
        undo();
        s.log.info({ ...what, why }, 'live screen closed');
      },
    });
    s.watchers.add(stop);
    if (o.opened) undo = o.opened(close);
  });
}

async function sessionLive(req: IncomingMessage, socket: Duplex, head: Buffer, s: Services, sessionId: string, url: URL): Promise<void> {
  if (!SESSION_ID.test(sessionId)) throw notFound('no such session');
  let tenant = await headerTenant(req, s);
  let control: boolean;
  if (tenant) {
    if (!canWatch(tenant)) throw forbidden("watching a session's screen needs the 'status' scope");
    control = tenant.scopes.includes('operator') && url.searchParams.get('control') !== '0';
  } else {
    const ticket = offered(req, TICKET_PREFIX);
    if (!ticket) throw new ServiceError('unauthenticated', 'missing X-Service-Token header or ticket subprotocol (POST /v1/sessions/{session_id}/live-ticket issues one)');
    const t = await redeemLiveTicket(s.state.atomic, ticket, sessionId);
    tenant = (await s.tenants.resolveById(t.tenantId)) ?? undefined;
    if (!tenant) throw new ServiceError('unauthenticated', 'the ticket tenant no longer exists');
    control = t.control;
  }
  const r = await s.sessions.get(tenant, sessionId);
  if (r.status === 'ended') throw new ServiceError('conflict', `the session ended (${r.end_reason}): ${r.detail ?? ''}`.trim());
  const ep = s.sessions.endpointOf(r, fleetOf(s));
  if (r.status !== 'live' || !ep) throw new ServiceError('unavailable', 'the session is still starting; retry shortly', { 'Retry-After': '1' });
  const target: LiveTarget = { endpoint: ep, backend: r.compute_backend, viewport: DEFAULT_VIEWPORT };
  // a person in control is a client of the session as a CDP client is (no idle timeout while they act; a session not
  // kept alive ends when its last client, this one included, leaves); a watcher is not; either is closed when it ends
  open(req, socket, head, s, target, control, { tenant_id: tenant.tenant_id, session_id: sessionId }, { opened: (close) => (control ? s.sessions.attach(r, close) : () => undefined) });
}

/** A running run's screen, watched only (status scope, or a ticket); taking it over is POST /v1/runs/{id}/takeover. */
async function runLive(req: IncomingMessage, socket: Duplex, head: Buffer, s: Services, runId: string): Promise<void> {
  if (!RUN_ID.test(runId)) throw notFound('no such run');
  let tenant = await headerTenant(req, s);
  if (tenant) {
    if (!canWatch(tenant)) throw forbidden("watching a run's screen needs the 'status' scope");
  } else {
    const ticket = offered(req, TICKET_PREFIX);
    if (!ticket) throw new ServiceError('unauthenticated', 'missing X-Service-Token header or ticket subprotocol (POST /v1/runs/{run_id}/live-ticket issues one)');
    const t = await redeemLiveTicket(s.state.atomic, ticket, `run:${runId}`);
    tenant = (await s.tenants.resolveById(t.tenantId)) ?? undefined;
    if (!tenant) throw new ServiceError('unauthenticated', 'the ticket tenant no longer exists');
  }
  const r = await s.runs.get(tenant, runId);
  if (RUN_ENDED.has(r.status)) throw new ServiceError('conflict', `the run ended (${r.status})`);
  const target = r.status === 'running' ? await s.liveRuns.target(tenant.tenant_id, runId) : undefined;
  if (!target) throw new ServiceError('unavailable', "the run's page is not bound yet; retry shortly", { 'Retry-After': '1' });
  const fleet = fleetOf(s);
  const endpoint = { ...target.endpoint, secret: target.endpoint.secret ?? fleet.secret, ca: target.endpoint.ca ?? fleet.ca };
  open(req, socket, head, s, { ...target, endpoint }, false, { tenant_id: tenant.tenant_id, run_id: runId });
}

async function takeoverLive(req: IncomingMessage, socket: Duplex, head: Buffer, s: Services, takeoverId: string): Promise<void> {
  const provider = s.takeoverTargets;
  if (!provider || !TAKEOVER_ID.test(takeoverId)) throw notFound('no such takeover');
  const claim = offered(req, CLAIM_PREFIX);
  if (!claim || !TAKEOVER_SECRET.test(claim)) throw new ServiceError('unauthenticated', 'missing claim subprotocol (runplane.claim.<claim> from POST /v1/takeover/claim)');
  const target = await provider.target(takeoverId, claim);
  if (!target) throw notFound('no such takeover, or it ended, or this claim does not hold it');
  const fleet = fleetOf(s);
  const endpoint = { ...target.endpoint, secret: target.endpoint.secret ?? fleet.secret, ca: target.endpoint.ca ?? fleet.ca };
  open(req, socket, head, s, { ...target, endpoint }, true, { takeover_id: takeoverId }, { onInput: (summary) => provider.recordInput?.(takeoverId, summary) });
}

/** The upgrade of a live screen's path; false when the path is no live screen's. */
export function liveUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, s: Services, url: URL): boolean {
  const ses = SESSION_LIVE_PATH.exec(url.pathname);
  const tko = ses ? null : TAKEOVER_LIVE_PATH.exec(url.pathname);
  const run = ses || tko ? null : RUN_LIVE_PATH.exec(url.pathname);
  if (!ses && !tko && !run) return false;
  const raw = (ses ?? tko ?? run)![1]!;
  void (async () => {
    let id: string;
    try {
      id = decodeURIComponent(raw);
    } catch {
      throw notFound(ses ? 'no such session' : run ? 'no such run' : 'no such takeover');
    }
    await (ses ? sessionLive(req, socket, head, s, id, url) : run ? runLive(req, socket, head, s, id) : takeoverLive(req, socket, head, s, id));
  })().catch((err: unknown) => refuseUpgrade(socket, err));
  return true;
}
