// WebSocket watchers: GET /v1/runs/{run_id}/ws follows one run, GET /v1/ws all
// runs of the tenant. Authenticated by X-Service-Token or, for browsers (which
// cannot set headers on a WebSocket), by a single-use ticket from
// POST /v1/ws-tickets offered as the subprotocol `runplane.ticket.<ticket>`,
// so no credential ever sits in a URL. Messages are the same ordered events as
// SSE; ?after=<seq> resumes. A watcher that cannot keep up is dropped.
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { ServiceError, notFound } from '../errors.ts';
import { headerTenant, refuseUpgrade as refuse } from '../http/upgrade.ts';
import { cdpUpgrade, CDP_PATH } from './cdp.ts';
import { liveUpgrade } from './live.ts';
import type { Tenant } from '../http/tenants.ts';
import { sawTheEnd, watch } from '../runs/watch.ts';
import type { Services } from '../services.ts';
import type { RouteSpec } from './route.ts';
import { TICKET_TTL_MS, issueTicket, redeemTicket } from '../http/tickets.ts';

const MAX_BUFFERED = 1024 * 1024;
const MAX_FRAME_BACKLOG = 256 * 1024;
const PROTOCOL = 'runplane.v1';
const TICKET_PREFIX = 'runplane.ticket.';

export const wsRoutes: RouteSpec[] = [
  {
    method: 'POST',
    path: '/v1/ws-tickets',
    ok: 'responses.schema.json#/$defs/Ticket',
    summary: 'A single-use, 30-second ticket for a browser: a WebSocket watcher (offered as the subprotocol runplane.ticket.<ticket>) or an EventSource (?ticket=<ticket> on GET /v1/runs/{run_id}/events?sse=true)',
    tags: ['runs'],
    auth: true,
    scope: 'logs',
    async handler(ctx, s) {
      const ticket = await issueTicket(s, ctx.state.tenant!.tenant_id);
      ctx.body = { ticket, expires_in: TICKET_TTL_MS / 1000, protocol: [PROTOCOL, `${TICKET_PREFIX}${ticket}`] };
    },
  },
];

function offeredProtocols(req: IncomingMessage): string[] {
  return String(req.headers['sec-websocket-protocol'] ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
}

async function authenticate(req: IncomingMessage, s: Services): Promise<Tenant> {
  const t = await headerTenant(req, s);
  if (t) return t;
  const ticket = offeredProtocols(req).find((p) => p.startsWith(TICKET_PREFIX))?.slice(TICKET_PREFIX.length);
  if (!ticket) throw new ServiceError('unauthenticated', 'missing X-Service-Token header or ticket subprotocol');
  return redeemTicket(s, ticket);
}

export function attachWebSockets(server: Server, s: Services): void {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: 4096,
    handleProtocols: (protocols) => (protocols.has(PROTOCOL) ? PROTOCOL : false),
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => {});
    const url = new URL(req.url ?? '/', 'http://gateway.local');
    const cdpMatch = CDP_PATH.exec(url.pathname);
    if (cdpMatch) {
      cdpUpgrade(req, socket, head, s, decodeURIComponent(cdpMatch[1]!), url);
      return;
    }
    if (liveUpgrade(req, socket, head, s, url)) return;
    const runMatch = /^\/v1\/runs\/([^/]{1,128})\/ws$/.exec(url.pathname);
    if (!runMatch && url.pathname !== '/v1/ws') {
      refuse(socket, notFound('no WebSocket route here'));
      return;
    }
    const after = Number(url.searchParams.get('after') ?? 0);
    // ?frames=1 on a run's socket: live screenshot frames besides the events
    const wantsFrames = runMatch !== null && ['1', 'true', 'on', 'yes'].includes((url.searchParams.get('frames') ?? '').toLowerCase());
    void (async () => {
      const tenant = await authenticate(req, s);
      if (!tenant.scopes.includes('logs')) throw new ServiceError('forbidden', "this token lacks the 'logs' scope");
      const runId = runMatch ? decodeURIComponent(runMatch[1]!) : undefined;
      if (runId) await s.runs.get(tenant, runId);
      const cursor = Number.isInteger(after) && after > 0 ? after : 0;
      // a watcher that has seen run.ended is closed normally at once, not left waiting
      const seenEnd = runId ? await sawTheEnd(s.runs, runId, cursor) : false;
      wss.handleUpgrade(req, socket, head, (ws: WebSocket) => {
        let w: { stop(): void } | undefined;
        let unframe: (() => void) | undefined;
        // replayed history may queue up before the client reads; only live events can be 'slow'
        let live = false;
        const stop = () => {
          w?.stop();
          unframe?.();
          s.watchers.delete(stop);
          if (ws.readyState === ws.OPEN) ws.close(1001, 'gateway shutting down');
        };
        s.watchers.add(stop);
        ws.on('close', () => {
          w?.stop();
          unframe?.();
          s.watchers.delete(stop);
        });
        ws.on('message', () => {
          /* watchers only listen */
        });
        if (seenEnd) {
          s.watchers.delete(stop);
          ws.close(1000, 'run ended');
          return;
        }
        if (wantsFrames && runId) {
          unframe = s.frames.watch(runId, (f) => {
            // a frame is worth dropping, never waiting for: a busy socket skips it
            if (ws.readyState === ws.OPEN && ws.bufferedAmount < MAX_FRAME_BACKLOG) ws.send(JSON.stringify(f));
          });
        }
        void watch(s.runs, {
          topic: runId ? `run:${runId}` : `tenant:${tenant.tenant_id}`,
          runId,
          after: cursor,
          send: (e) => {
            if (ws.readyState !== ws.OPEN) return;
            if (live && ws.bufferedAmount > MAX_BUFFERED) {
              s.log.warn({ tenant_id: tenant.tenant_id, run_id: runId }, 'slow WebSocket watcher dropped');
              ws.terminate();
              return;
            }
            ws.send(JSON.stringify(e));
          },
          ended: () => ws.close(1000, 'run ended'),
        }).then((handle) => {
          w = handle;
          live = true;
          if (ws.readyState !== ws.OPEN) handle.stop();
        });
      });
    })().catch((err: unknown) => refuse(socket, err));
  });
}
