// The gateway's pipeline, top to bottom. Cross-cutting concerns are one small
// middleware each; per-route auth, scope and body validation come from each
// route's own declaration.
import Koa from 'koa';
import Router from '@koa/router';
import { badRequest } from './errors.ts';
import { requestId } from './http/request-id.ts';
import { accessLog } from './http/access-log.ts';
import { errorBodies } from './http/errors.ts';
import { platformRoutes } from './http/platform.ts';
import { authenticate, requireScope } from './http/auth.ts';
import { readJsonBody } from './http/body.ts';
import { redeemTicket } from './http/tickets.ts';
import { validator, describeError } from '../schemas/index.ts';
import type { GatewayState, Ctx, Next } from './context.ts';
import type { RouteSpec } from './routes/route.ts';
import type { Services } from './services.ts';
import { opsRoutes } from './routes/ops.ts';
import { predictRoutes } from './routes/predict.ts';
import { runRoutes } from './routes/runs.ts';
import { recipeRoutes } from './routes/recipes.ts';
import { compiledPlanRoutes } from './routes/compiled-plans.ts';
import { wsRoutes } from './routes/ws.ts';
import { pluginListRoutes } from './routes/plugins.ts';
import { brainRoutes } from './routes/brains.ts';
import { chatRoutes } from './routes/chat-completions.ts';
import { diagnoseRoutes } from './routes/diagnose.ts';
import { planeRoutes } from './routes/planes.ts';
import { sessionRoutes } from './routes/sessions.ts';
import { liveRoutes } from './routes/live.ts';
import { credentialRoutes } from './routes/credentials.ts';
import { takeoverRoutes } from './routes/takeover.ts';
import { profileRoutes } from './routes/profiles.ts';
import { agentAuth } from './http/agent-auth.ts';
import { mcpRoutes } from './mcp/http.ts';

/** The gateway's own routes; the routes plugins declare are added by createGateway. */
export const ALL_ROUTES: RouteSpec[] = [...opsRoutes, ...predictRoutes, ...runRoutes, ...recipeRoutes, ...compiledPlanRoutes, ...wsRoutes, ...pluginListRoutes, ...brainRoutes, ...chatRoutes, ...diagnoseRoutes, ...planeRoutes, ...sessionRoutes, ...liveRoutes, ...credentialRoutes, ...takeoverRoutes, ...mcpRoutes, ...profileRoutes];

function routeChain(route: RouteSpec, s: Services) {
  const chain: Array<(ctx: Ctx, next: Next) => Promise<unknown>> = [];
  if (route.openai) {
    chain.push(async (ctx, next) => {
      ctx.state.errorShape = 'openai';
      return next();
    });
  }
  if (route.auth === 'agent') {
    chain.push(agentAuth(s.config.planeSecret));
  } else if (route.auth) {
    const byToken = authenticate(s.tenants, { bearer: route.openai === true || route.bearer === true });
    const ticketed = route.ticket;
    chain.push(
      ticketed
        ? async (ctx, next) => {
          const ticket = ctx.query.ticket;
          if (typeof ticket !== 'string' || ctx.get('x-service-token') || !ticketed(ctx)) return byToken(ctx, next);
          ctx.state.tenant = await redeemTicket(s, ticket);
          return next();
        }
        : byToken,
    );
  }
  if (route.scope) {
    const scope = route.scope;
    chain.push(async (ctx, next) => {
      requireScope(ctx, scope);
      return next();
    });
  }
  if (route.body) {
    const { schema, precheck, maxBytes } = route.body;
    const validate = validator(schema);
    chain.push(async (ctx, next) => {
      const body = await readJsonBody(ctx, { maxBytes: maxBytes?.(s) ?? s.config.maxBodyBytes, maxDepth: s.config.maxJsonDepth });
      if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('(body): must be a JSON object');
      // the schema runs once; a precheck only words the refusal of a body the schema refused
      if (!validate(body)) {
        precheck?.(body);
        throw badRequest(describeError('', validate.errors));
      }
      ctx.state.body = body;
      return next();
    });
  }
  chain.push(async (ctx) => route.handler(ctx, s));
  return chain;
}

/** Hands requests under a plugin's mount prefix to the plugin's own HTTP service (its auth, bodies and errors). */
function pluginMounts(s: Services) {
  return async (ctx: Ctx, next: Next): Promise<void> => {
    const mount = s.plugins.mounts().find((m) => ctx.path === m.prefix || ctx.path.startsWith(`${m.prefix}/`));
    if (!mount) {
      await next();
      return;
    }
    ctx.respond = false;
    // the gateway's request metrics label it by mount (the mounted service counts its own routes)
    (ctx as unknown as { _matchedRoute?: string })._matchedRoute = `${mount.prefix}/*`;
    await new Promise<void>((resolve) => {
      ctx.res.once('close', resolve);
      mount.handler(ctx.req, ctx.res);
    });
  };
}

/** Which error shape a (method, path) gets before routing: OpenAI's when it is an `openai` route's (the platform layer's refusals). */
function errorShapeOf(routes: RouteSpec[]) {
  const openai = routes.filter((r) => r.openai).map((r) => ({ method: r.method, re: new RegExp(`^${r.path.replace(/:[A-Za-z_]+/g, '[^/]+')}$`) }));
  return (method: string, path: string): 'openai' | undefined => (openai.some((r) => r.method === method && r.re.test(path)) ? 'openai' : undefined);
}

export function buildApp(s: Services, routes: RouteSpec[] = ALL_ROUTES): Koa<GatewayState> {
  const app = new Koa<GatewayState>({ proxy: false });
  app.silent = true; // errors are logged by errorBodies, once, without tokens
  const router = new Router<GatewayState>();
  for (const r of routes) {
    const method = r.method.toLowerCase() as 'get' | 'post' | 'put' | 'delete';
    router[method](r.path, ...(routeChain(r, s) as never[]));
  }
  app.use(requestId());
  app.use(accessLog(s.log, (route, method, status, seconds) => s.metrics.httpRequest(route, method, status, seconds)));
  app.use(errorBodies(s.log));
  app.use(platformRoutes(s.config.gatewayApiKey, errorShapeOf(routes)));
  app.use(pluginMounts(s));
  app.use(router.routes());
  app.use(router.allowedMethods({ throw: true }));
  return app;
}
