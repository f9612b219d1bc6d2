// createIngestApp(options): the trace-ingest service as a Koa app that runs
// on its own (`npm run ingest`) or mounted by the gateway's plugin host.
// Pipeline: {detail} errors -> health/metrics/docs -> route match -> credential
// (DSN bearer, session cookie, admin) -> body (size-capped) -> handler.
import { createRequire } from 'node:module';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import Koa from 'koa';
import type { AddressInfo } from 'node:net';
import { idProblem } from '../../shared/ids.ts';
import { newSessionId, signCookie, verifyCookie } from './auth.ts';
import { RATE_LIMITS_HEADER } from '../../sdk/categories.ts';
import { IngestError, parseJson, readJson, readMultipart, type FilePart } from './http.ts';
import { UNMATCHED, createIngestMetrics } from './metrics.ts';
import { buildOpenApi } from './openapi.ts';
import { isDbUnavailable } from './meta/db.ts';
import { pathParamProblem } from './route-kit.ts';
import { ROUTES, type Reply, type RouteCtx, type RouteDef } from './routes.ts';
import { IngestService, type IngestOptions, type Viewer } from './service.ts';
import { runBatch } from './batch.ts';
import { keepAliveBeyondHint } from '../../shared/keep-alive.ts';

export type { IngestOptions };

export const SESSION_COOKIE = 'trace_session';
export const OVERRIDE_COOKIE = 'trace_tenant_override';

interface Compiled {
  def: RouteDef;
  re: RegExp;
  names: string[];
}

function compile(def: RouteDef): Compiled {
  const names: string[] = [];
  const re = def.path.replace(/[.]/g, '\\.').replace(/:(\w+)/g, (_m, n: string) => {
    names.push(n);
    return '([^/]+)';
  }).replace(/\*$/, () => {
    names.push('*');
    return '(.+)';
  });
  return { def, re: new RegExp(`^${re}$`), names };
}

const COMPILED = ROUTES.map(compile);

function match(method: string, p: string): { route: Compiled; params: Record<string, string> } | 'method' | null {
  let pathMatched = false;
  for (const c of COMPILED) {
    const m = c.re.exec(p);
    if (!m) continue;
    pathMatched = true;
    if (c.def.method !== method) continue;
    const params: Record<string, string> = {};
    try {
      c.names.forEach((n, i) => (params[n] = decodeURIComponent(m[i + 1]!)));
    } catch {
      throw new IngestError(400, 'malformed percent-encoding in the path');
    }
    return { route: c, params };
  }
  return pathMatched ? 'method' : null;
}

function cookies(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (header ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0) out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

export interface IngestApp {
  app: Koa;
  service: IngestService;
  /** the Node request handler */
  callback(): http.RequestListener;
  /** listens on host:port (0 picks a free port); resolves with the base URL */
  listen(port?: number, host?: string): Promise<string>;
  close(): Promise<void>;
}

const requireFromHere = createRequire(import.meta.url);
const ASSETS: Record<string, { pkg: string; file: string; type: string }> = {
  'swagger-ui.css': { pkg: 'swagger-ui-dist', file: 'swagger-ui.css', type: 'text/css; charset=utf-8' },
  'swagger-ui-bundle.js': { pkg: 'swagger-ui-dist', file: 'swagger-ui-bundle.js', type: 'text/javascript; charset=utf-8' },
  'redoc.standalone.js': { pkg: 'redoc', file: 'bundles/redoc.standalone.js', type: 'text/javascript; charset=utf-8' },
};

export async function createIngestApp(options: IngestOptions): Promise<IngestApp> {
  const service = await IngestService.open(options);
  const prefix = (options.mountPrefix ?? '').replace(/\/+$/, '');
  const api = `${prefix}/api/v1`;
  const ttl = options.cookieTtlSeconds ?? 12 * 3600;
  const maxBody = options.maxBodyBytes ?? 16 * 1024 * 1024;
  const maxImage = options.maxImageBytes ?? 20 * 1024 * 1024;
  const log = options.logger;
  const openapi = JSON.stringify(buildOpenApi(prefix));
  const app = new Koa({ proxy: options.trustProxy ?? false });
  const servers = new Set<http.Server>();

  const setCookie = (ctx: Koa.Context, name: string, value: string, maxAge: number) => {
    const secure = options.secureCookies || ctx.secure ? '; Secure' : '';
    ctx.append('Set-Cookie', `${name}=${value}; Path=${api}; Max-Age=${maxAge}; HttpOnly; SameSite=Lax${secure}`);
  };

  async function viewer(ctx: Koa.Context, admin: boolean): Promise<Viewer> {
    const jar = cookies(ctx.get('cookie'));
    const secret = service.cookieSecret;
    const claims = verifyCookie(secret, jar[SESSION_COOKIE]);
    if (!claims) throw new IngestError(401, 'log in first (trace_session cookie missing, invalid or expired)');
    // a cookie without a session id predates server-side sessions and cannot be revoked: log in again
    if (!claims.sid || (await service.meta.sessionRevoked(claims.sid))) throw new IngestError(401, 'this session was logged out; log in again');
    const user = await service.meta.user(claims.sub);
    const home = user ? await service.meta.tenant(user.tenant_id) : undefined;
    if (!user || !home) throw new IngestError(401, 'the session user no longer exists');
    if (admin && !user.is_admin) throw new IngestError(403, 'admin users only');
    let tenant = home;
    const override = verifyCookie(secret, jar[OVERRIDE_COOKIE]);
    const chosen = override && user.is_admin ? await service.meta.tenant(override.sub) : undefined;
    if (chosen) tenant = chosen;
    return { user, home, tenant, impersonating: tenant.tenant_id !== home.tenant_id };
  }

  async function principal(ctx: Koa.Context) {
    const auth = ctx.get('authorization');
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    if (!m) throw new IngestError(401, 'Authorization: Bearer <DSN key> is required');
    return service.principal(m[1]!, ctx.get('x-trace-client-id') || undefined);
  }

  /**
   * Path segments within their limits: on an ingest (DSN) route every segment
   * (pathParamProblem) or 400; on a read, a run id that is not a safe id is 404.
   */
  function checkParams(def: RouteDef, params: Record<string, string>): void {
    if (def.auth === 'dsn') {
      for (const [name, value] of Object.entries(params)) {
        const problem = pathParamProblem(name, value);
        if (problem) throw new IngestError(400, problem);
      }
      return;
    }
    const problem = 'id' in params ? idProblem('the run id', params.id) : null;
    if (problem) throw new IngestError(404, `no run: ${problem}`);
  }

  /** Takes the record from its tenant's limit of the route's category (429 with X-Trace-Rate-Limits when spent). */
  async function limit(def: RouteDef, rc: RouteCtx): Promise<void> {
    if (def.category && rc.principal) await service.limits.take(rc.principal.tenant.tenant_id, def.category);
  }

  /** Runs a route's handler once its path segments are checked; its writes count in its category's share of the queue. */
  async function run(def: RouteDef, rc: RouteCtx): Promise<Reply> {
    checkParams(def, rc.params);
    rc.category = def.category;
    return def.handler(service, rc);
  }

  /**
   * The records of a batch: a JSON body, or a multipart body whose `requests`
   * part (JSON) names, for each screenshot, the part holding its image.
   */
  async function batchBody(ctx: Koa.Context): Promise<{ body: unknown; files?: Map<string, FilePart> }> {
    if (!/^multipart\/form-data\s*;/i.test(ctx.get('content-type'))) return { body: await readJson(ctx.req, maxBody) };
    const parts = await readMultipart(ctx.req, maxImage);
    const requests = parts.find((p) => p.name === 'requests');
    if (!requests) throw new IngestError(422, 'a multipart batch needs a part named requests ({requests: [{method, path, body | image}]})');
    return { body: parseJson(requests.data, 128, 'the requests part'), files: new Map(parts.filter((p) => p !== requests).map((p) => [p.name, p])) };
  }

  async function batch(ctx: Koa.Context, rc: RouteCtx, files?: Map<string, FilePart>): Promise<void> {
    const body = rc.body as { requests?: unknown };
    if (!body || typeof body !== 'object' || !Array.isArray(body.requests)) throw new IngestError(422, 'requests: must be an array of {method, path, body}');
    if (body.requests.length > 1000) throw new IngestError(422, 'requests: at most 1000 per batch');
    if (service.queue.depth >= service.queue.limit) {
      service.queue.reject('all');
      throw new IngestError(429, 'ingest queue saturated; retry later', { 'Retry-After': '1' });
    }
    const { results, limited, retryAfter } = await runBatch({ match, limit, run }, rc, body.requests, files);
    service.count('batches');
    if (limited.length) ctx.set(RATE_LIMITS_HEADER, limited.join(', '));
    if (retryAfter) ctx.set('Retry-After', String(retryAfter));
    ctx.status = 207;
    ctx.body = { results };
  }

  const metrics = createIngestMetrics(service);
  // outermost, so the status counted is the one sent, errors included
  app.use(async (ctx, next) => {
    const t0 = performance.now();
    try {
      await next();
    } finally {
      metrics.request((ctx.state as { route?: string }).route ?? UNMATCHED, ctx.method, ctx.status, (performance.now() - t0) / 1000);
    }
  });

  app.use(async (ctx, next) => {
    try {
      await next();
    } catch (err) {
      if (err instanceof IngestError) {
        ctx.status = err.status;
        ctx.set(err.headers);
        ctx.body = { detail: err.detail };
        return;
      }
      if (isDbUnavailable(err)) {
        log?.warn('ingest: metadata database unavailable', { error: (err as Error).message, path: ctx.path });
        ctx.status = 503;
        ctx.set('Retry-After', '1');
        ctx.body = { detail: 'the metadata database is unavailable; retry later' };
        return;
      }
      log?.error('ingest: unhandled error', { error: (err as Error).stack ?? String(err), path: ctx.path });
      ctx.status = 500;
      ctx.body = { detail: 'internal error' };
    }
  });

  app.use(async (ctx, next) => {
    ctx.set('X-Content-Type-Options', 'nosniff');
    const p = ctx.path;
    if (ctx.method === 'GET' && (p === '/healthz' || p === `${api}/healthz`)) {
      ctx.state.route = '/healthz';
      ctx.body = { status: 'ok', queue_depth: service.queue.depth };
      return;
    }
    if (!p.startsWith(`${api}/`)) return next();
    const sub = p.slice(api.length);
    if (ctx.method === 'GET' && sub === '/metrics') {
      ctx.state.route = '/metrics';
      const m = await metrics.render();
      ctx.type = m.contentType;
      ctx.body = m.body;
      return;
    }
    if (ctx.method === 'GET' && sub === '/openapi.json') {
      ctx.state.route = '/openapi.json';
      ctx.type = 'application/json';
      ctx.body = openapi;
      return;
    }
    if (ctx.method === 'GET' && (sub === '/docs' || sub === '/redoc')) {
      ctx.state.route = sub;
      ctx.type = 'text/html; charset=utf-8';
      ctx.set('Content-Security-Policy', "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; worker-src 'self' blob:");
      ctx.body =
        sub === '/docs'
          ? `<!doctype html><html><head><meta charset="utf-8"><title>Trace ingest API</title><link rel="stylesheet" href="${api}/docs/assets/swagger-ui.css"></head><body><div id="ui"></div><script src="${api}/docs/assets/swagger-ui-bundle.js"></script><script src="${api}/docs/assets/init.js"></script></body></html>`
          : `<!doctype html><html><head><meta charset="utf-8"><title>Trace ingest API</title></head><body><redoc spec-url="${api}/openapi.json"></redoc><script src="${api}/docs/assets/redoc.standalone.js"></script></body></html>`;
      return;
    }
    const asset = /^\/docs\/assets\/([\w.-]+)$/.exec(sub)?.[1];
    if (ctx.method === 'GET' && asset) {
      ctx.state.route = '/docs/assets/:name';
      if (asset === 'init.js') {
        ctx.type = 'text/javascript; charset=utf-8';
        ctx.body = `window.ui = SwaggerUIBundle({ url: ${JSON.stringify(`${api}/openapi.json`)}, dom_id: '#ui' });\n`;
        return;
      }
      const a = Object.hasOwn(ASSETS, asset) ? ASSETS[asset] : undefined;
      if (!a) throw new IngestError(404, `no asset ${asset}`);
      ctx.type = a.type;
      ctx.set('Cache-Control', 'public, max-age=86400');
      ctx.body = await readFile(path.join(path.dirname(requireFromHere.resolve(`${a.pkg}/package.json`)), a.file));
      return;
    }

    let abort: AbortController | undefined;
    const rc: RouteCtx = {
      params: {},
      query: Object.fromEntries(Object.entries(ctx.query).map(([k, v]) => [k, Array.isArray(v) ? v[0] ?? '' : (v ?? '')])),
      body: undefined,
      // made for the routes that ask (the commands long-poll): an abort builds a DOMException, a
      // stack trace included, and a request's 'close' often came before its answer was finished
      get signal() {
        if (!abort) {
          const made = new AbortController();
          abort = made;
          if (ctx.res.destroyed) made.abort();
          else ctx.res.once('close', () => void (ctx.res.writableFinished || made.abort()));
        }
        return abort.signal;
      },
      baseUrl: `${ctx.protocol}://${ctx.host}${prefix}`,
      address: ctx.ip,
    };

    if (sub === '/batch') {
      ctx.state.route = '/batch';
      if (ctx.method !== 'POST') throw new IngestError(405, 'use POST');
      rc.principal = await principal(ctx);
      const { body, files } = await batchBody(ctx);
      rc.body = body;
      await batch(ctx, rc, files);
      return;
    }
    const found = match(ctx.method, sub);
    if (found === null) throw new IngestError(404, `no route for ${ctx.method} ${p.slice(0, 200)}`);
    if (found === 'method') throw new IngestError(405, `method ${ctx.method} not allowed on ${p.slice(0, 200)}`);
    const def = found.route.def;
    ctx.state.route = def.path;
    rc.params = found.params;
    if (def.auth === 'dsn') rc.principal = await principal(ctx);
    else if (def.auth === 'cookie' || def.auth === 'admin') rc.viewer = await viewer(ctx, def.auth === 'admin');
    // before the body, so a bad segment is 400 whatever the body (a screenshot's multipart included)
    checkParams(def, rc.params);
    // before the body too: a throttled screenshot is refused before its bytes are read
    await limit(def, rc);
    if (def.body === 'json') rc.body = await readJson(ctx.req, maxBody);
    else if (def.body === 'multipart') rc.parts = await readMultipart(ctx.req, maxImage);
    const reply = await run(def, rc);
    const secret = service.cookieSecret;
    if (reply.login) setCookie(ctx, SESSION_COOKIE, signCookie(secret, { sub: reply.login, exp: Math.floor(Date.now() / 1000) + ttl, sid: newSessionId() }), ttl);
    if (reply.logout) {
      // the server forgets the session, so the cookie is dead wherever a copy of it is
      const ending = verifyCookie(secret, cookies(ctx.get('cookie'))[SESSION_COOKIE]);
      if (ending?.sid) await service.meta.revokeSession(ending.sid, ending.exp);
      setCookie(ctx, SESSION_COOKIE, '', 0);
      setCookie(ctx, OVERRIDE_COOKIE, '', 0);
    }
    if (reply.impersonate === null) setCookie(ctx, OVERRIDE_COOKIE, '', 0);
    else if (reply.impersonate) setCookie(ctx, OVERRIDE_COOKIE, signCookie(secret, { sub: reply.impersonate, exp: Math.floor(Date.now() / 1000) + ttl }), ttl);
    if (reply.headers) ctx.set(reply.headers);
    ctx.status = reply.status ?? 200;
    if (reply.raw !== undefined) {
      ctx.type = reply.type ?? 'application/octet-stream';
      ctx.body = reply.raw;
    } else ctx.body = reply.body ?? {};
  });

  app.use(async (ctx) => {
    throw new IngestError(404, `no route for ${ctx.method} ${ctx.path.slice(0, 200)}`);
  });

  return {
    app,
    service,
    callback: () => app.callback(),
    listen(port = 0, host = '127.0.0.1') {
      const server = http.createServer(app.callback());
      keepAliveBeyondHint(server);
      servers.add(server);
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          const a = server.address() as AddressInfo;
          resolve(`http://${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}${prefix}`);
        });
      });
    },
    async close() {
      await service.close();
      await Promise.all(
        [...servers].map(
          (s) =>
            new Promise<void>((resolve) => {
              s.close(() => resolve());
              s.closeAllConnections();
            }),
        ),
      );
    },
  };
}
