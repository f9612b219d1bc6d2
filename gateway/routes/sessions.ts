// /v1/sessions: browser sessions a client drives with its own code over CDP.
// Create and release need the run scope, reads the status scope; another tenant's
// session is 404 on every route. The CDP WebSocket itself is routes/cdp.ts.
import path from 'node:path';
import { ServiceError, badRequest } from '../errors.ts';
import { computerArgv } from '../sessions/computer.ts';
import type { Ctx } from '../context.ts';
import { runDir } from '../runs/records.ts';
import { sessionBody, type SessionRecord } from '../sessions/records.ts';
import { CONNECT_TICKET_TTL_MS, issueConnectTicket } from '../sessions/tickets.ts';
import type { SessionSpec } from '../sessions/sessions-service.ts';
import type { Tenant } from '../http/tenants.ts';
import type { Services } from '../services.ts';
import type { ComputerAction, SessionCreateRequest } from '../../schemas/types.gen.ts';
import { TRACE_FILE_CONTENT, answerTraceFile, answerTraceIndex } from './trace-files.ts';
import { BINARY_BODY, pageLimit, param, queryOnce, sendFile, type RouteSpec } from './route.ts';
import { fleetOf } from './cdp.ts';

/** What a download's name may be: the agent names files itself (no path, no quote). */
const DOWNLOAD_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;
const base = (ctx: Ctx): string => `${ctx.protocol}://${ctx.host}`;
const sessionId = (ctx: Ctx): string => param(ctx, 'session_id');

/** The body of a session, with a fresh connect URL when the caller is about to connect. */
async function answer(ctx: Ctx, s: Services, r: SessionRecord, withTicket: boolean): Promise<Record<string, unknown>> {
  const body: Record<string, unknown> = sessionBody(r, base(ctx));
  if (withTicket && r.status !== 'ended') {
    const ticket = await issueConnectTicket(s.state.atomic, r.tenant_id, r.session_id);
    body.connect_url = `${String(body.cdp_url)}?ticket=${ticket}`;
    body.connect_expires_in = CONNECT_TICKET_TTL_MS / 1000;
  }
  return body;
}

export function specOf(b: SessionCreateRequest, tenant: Tenant, s: Services): SessionSpec {
  const timeout = Math.min(b.timeout_seconds ?? 900, Math.floor(tenant.max_time_minutes_per_run * 60));
  if (timeout < 10) throw badRequest(`timeout_seconds: the tenant's max_time_minutes_per_run allows ${timeout} s, below the 10 s a session needs`, 'timeout_seconds');
  const runtime: Record<string, unknown> = {
    proxy_provider: tenant.proxy_provider ?? b.proxy_provider ?? s.config.proxyProvider,
    ...(b.proxy_disabled !== undefined ? { proxy_disabled: b.proxy_disabled } : {}),
    ...(b.proxy_city !== undefined ? { proxy_city: b.proxy_city } : {}),
    ...(b.proxy_state !== undefined ? { proxy_state: b.proxy_state } : {}),
    ...(b.proxy_sticky !== undefined ? { proxy_sticky: b.proxy_sticky } : {}),
    ...(b.plane_labels !== undefined ? { plane_labels: b.plane_labels } : {}),
  };
  if (s.proxies && runtime.proxy_disabled !== true && !s.proxies.has(String(runtime.proxy_provider))) {
    throw badRequest(`proxy_provider: '${String(runtime.proxy_provider)}' is not configured on this deployment`, 'proxy_provider');
  }
  return {
    compute_backend: b.compute_backend ?? tenant.default_compute_backend ?? 'dom_plane',
    profile_id: b.profile_id,
    viewport: b.viewport ? [b.viewport.width, b.viewport.height] : undefined,
    idle_timeout_seconds: b.idle_timeout_seconds ?? 300,
    timeout_seconds: timeout,
    keep_alive: b.keep_alive ?? false,
    runtime,
  };
}

export const sessionRoutes: RouteSpec[] = [
  {
    method: 'POST',
    path: '/v1/sessions',
    ok: 'responses.schema.json#/$defs/Session',
    summary: 'Create a browser session on either plane: answers once its browser is up, with cdp_url (X-Service-Token) and connect_url (a single-use 60 s ticket) for puppeteer.connect or connectOverCDP. It holds one of the tenant\'s concurrent run slots until it ends',
    tags: ['sessions'],
    auth: true,
    scope: 'run',
    rateLimited: true,
    body: { schema: 'sessions.schema.json' },
    responses: { '429': 'rate or concurrency limit (sessions and runs share max_concurrent_runs); honour Retry-After', '409': 'profile_id is held by a run or another session', '503': 'no plane could start the browser' },
    async handler(ctx, s) {
      const tenant = ctx.state.tenant!;
      const spec = specOf(ctx.state.body as SessionCreateRequest, tenant, s);
      // a session start costs a browser, as a run's does: one rate token
      const headers = await s.limits.takeRateToken(tenant);
      if (headers) ctx.set({ ...headers });
      const record = await s.sessions.create(tenant, spec);
      ctx.body = await answer(ctx, s, record, true);
    },
  },
  {
    method: 'GET',
    path: '/v1/sessions',
    ok: 'responses.schema.json#/$defs/SessionList',
    summary: "The tenant's sessions, newest first: ?limit= (1-100, default 20), ?cursor= (next_cursor of the previous page)",
    tags: ['sessions'],
    auth: true,
    scope: 'status',
    async handler(ctx, s) {
      const cursor = queryOnce(ctx, 'cursor');
      const page = await s.sessions.list(ctx.state.tenant!, pageLimit(ctx), cursor);
      ctx.body = { sessions: page.items.map((r) => sessionBody(r, base(ctx))), next_cursor: page.next_cursor };
    },
  },
  {
    method: 'GET',
    path: '/v1/sessions/:session_id',
    ok: 'responses.schema.json#/$defs/Session',
    summary: 'A session: live or ended (end_reason says why), its CDP URL and, once ended, its video',
    tags: ['sessions'],
    auth: true,
    scope: 'status',
    async handler(ctx, s) {
      ctx.body = await answer(ctx, s, await s.sessions.get(ctx.state.tenant!, sessionId(ctx)), false);
    },
  },
  {
    method: 'POST',
    path: '/v1/sessions/:session_id/connect',
    ok: 'responses.schema.json#/$defs/Session',
    summary: 'A fresh connect_url (single-use ticket, 60 s) for a client that re-attaches to a live session',
    tags: ['sessions'],
    auth: true,
    scope: 'run',
    async handler(ctx, s) {
      ctx.body = await answer(ctx, s, await s.sessions.get(ctx.state.tenant!, sessionId(ctx)), true);
    },
  },
  {
    method: 'DELETE',
    path: '/v1/sessions/:session_id',
    ok: 'responses.schema.json#/$defs/Session',
    summary: 'Release a session: its browser closes, its clients are disconnected and its slot is free (a second DELETE answers the ended session)',
    tags: ['sessions'],
    auth: true,
    scope: 'run',
    async handler(ctx, s) {
      ctx.body = await answer(ctx, s, await s.sessions.release(ctx.state.tenant!, sessionId(ctx)), false);
    },
  },
  {
    method: 'GET',
    path: '/v1/sessions/:session_id/downloads',
    ok: 'responses.schema.json#/$defs/SessionDownloads',
    summary: "The files the session's browser downloaded (into the session's own folder on its agent), while the session is live",
    tags: ['sessions'],
    auth: true,
    scope: 'result',
    async handler(ctx, s) {
      const r = await s.sessions.get(ctx.state.tenant!, sessionId(ctx));
      const got = await s.sessions.planeCall(r, fleetOf(s), 'downloads', 'GET');
      ctx.body = { files: Array.isArray(got.body.files) ? got.body.files : [] };
    },
  },
  {
    method: 'GET',
    path: '/v1/sessions/:session_id/downloads/:name',
    content: { 'application/octet-stream': BINARY_BODY },
    summary: 'One downloaded file of a live session, by the name the downloads listing gives',
    tags: ['sessions'],
    auth: true,
    scope: 'result',
    async handler(ctx, s) {
      const r = await s.sessions.get(ctx.state.tenant!, sessionId(ctx));
      const name = param(ctx, 'name');
      if (!DOWNLOAD_NAME.test(name)) throw badRequest('name: not a file name the downloads listing gives', 'name');
      const got = await s.sessions.planeCall(r, fleetOf(s), 'downloads/file', 'POST', { name });
      ctx.type = 'application/octet-stream';
      ctx.set('Content-Disposition', `attachment; filename="${name}"`);
      ctx.body = got.blob ?? Buffer.alloc(0);
    },
  },
  {
    method: 'POST',
    path: '/v1/sessions/:session_id/computer',
    ok: 'responses.schema.json#/$defs/ComputerResult',
    content: { 'image/png': BINARY_BODY },
    summary: "One input on a computer_plane session's display by xdotool (move, click, double_click, right_click, drag, scroll, type, key), recorded in its video like a run's actions; or a PNG screenshot (either plane)",
    tags: ['sessions'],
    auth: true,
    scope: 'run',
    body: { schema: 'sessions.schema.json#/$defs/ComputerAction' },
    async handler(ctx, s) {
      const r = await s.sessions.get(ctx.state.tenant!, sessionId(ctx));
      const a = ctx.state.body as ComputerAction;
      if (a.action === 'screenshot') {
        const shot = await s.sessions.planeCall(r, fleetOf(s), 'screenshot', 'POST', { format: 'png' });
        ctx.type = 'image/png';
        ctx.body = shot.blob ?? Buffer.alloc(0);
        return;
      }
      if (r.compute_backend !== 'computer_plane') throw new ServiceError('conflict', 'the computer API acts on a display: it is for computer_plane sessions (a dom_plane session takes input over CDP)');
      for (const argv of computerArgv(a)) {
        const done = await s.sessions.planeCall(r, fleetOf(s), 'xdotool', 'POST', { argv }, true);
        if (done.body.returncode !== 0) {
          ctx.body = { action: a.action, ok: false, detail: `xdotool ${argv[0]} failed: ${String(done.body.stderr ?? '').slice(0, 200)}` };
          return;
        }
      }
      ctx.body = { action: a.action, ok: true };
    },
  },
  {
    method: 'GET',
    path: '/v1/sessions/:session_id/trace',
    ok: 'responses.schema.json#/$defs/RunTrace',
    summary: "An ended session's trace, read like a run's: a step each time its page changed (the CDP navigations and inputs, or a new URL) with the screenshot after; 404 until the session ended",
    tags: ['sessions'],
    auth: true,
    scope: 'logs',
    async handler(ctx, s) {
      const r = await s.sessions.get(ctx.state.tenant!, sessionId(ctx));
      await s.sessions.traceWritten(r.session_id);
      const subject = { tenant_id: r.tenant_id, run_id: r.session_id };
      await answerTraceIndex(ctx, s, subject, `/v1/sessions/${encodeURIComponent(r.session_id)}/trace`, r.status === 'ended' ? 'this session left no trace' : 'the trace is written when the session ends');
    },
  },
  {
    method: 'GET',
    path: '/v1/sessions/:session_id/trace/*file',
    summary: "One file of an ended session's trace bundle",
    content: TRACE_FILE_CONTENT,
    tags: ['sessions'],
    auth: true,
    scope: 'logs',
    async handler(ctx, s) {
      const r = await s.sessions.get(ctx.state.tenant!, sessionId(ctx));
      await s.sessions.traceWritten(r.session_id);
      await answerTraceFile(ctx, s, { tenant_id: r.tenant_id, run_id: r.session_id });
    },
  },
  {
    method: 'GET',
    path: '/v1/sessions/:session_id/video',
    content: { 'video/webm': BINARY_BODY },
    summary: "An ended session's recording (WebM), when its plane kept one",
    tags: ['sessions'],
    auth: true,
    scope: 'result',
    async handler(ctx, s) {
      const r = await s.sessions.get(ctx.state.tenant!, sessionId(ctx));
      const missing = r.status === 'ended' ? 'this session left no recording' : 'the recording is written when the session ends';
      await sendFile(ctx, path.join(runDir(s.config.dataDir, { tenant_id: r.tenant_id, run_id: r.session_id }), 'video.webm'), 'video/webm', missing);
    },
  },
];
