// GET /v1/plugins (what is loaded) and the routes plugins declared, mounted
// under /v1/plugins/<name>/. A plugin route gets the gateway's auth, scope and
// body guards from its declaration; the plugin sees a plain request context
// (no tokens) and answers {status, body}; error answers are always {detail}.
import { ServiceError } from '../errors.ts';
import { readJsonBody } from '../http/body.ts';
import type { Ctx } from '../context.ts';
import type { Logger } from '../log.ts';
import type { PluginRoute, PluginRouteContext } from '../plugins/contract.ts';
import type { PluginRegistry } from '../plugins/registry.ts';
import type { RouteSpec } from './route.ts';

export const PLUGIN_ROUTE_PREFIX = '/v1/plugins';

export const pluginListRoutes: RouteSpec[] = [
  {
    method: 'GET',
    path: PLUGIN_ROUTE_PREFIX,
    summary: 'Loaded plugins in load order: name, version, apiVersion, source (builtin or operator) and what each registered',
    tags: ['plugins'],
    auth: true,
    ok: 'responses.schema.json#/$defs/PluginList',
    responses: { '200': '{plugins: [{name, version, apiVersion, source, dependsOn, route_prefix, registered: {step_types, step_handlers, brains, recipes, host_tools, trace_sinks, routes}}]}' },
    async handler(ctx, s) {
      ctx.body = {
        plugins: s.plugins.plugins.map((p) => ({
          name: p.name,
          version: p.version,
          apiVersion: p.apiVersion,
          source: p.source,
          ...(p.description ? { description: p.description } : {}),
          dependsOn: p.dependsOn,
          route_prefix: `${PLUGIN_ROUTE_PREFIX}/${p.name}`,
          registered: p.registered,
        })),
      };
    },
  },
];

const HIDDEN_HEADERS = new Set(['x-service-token', 'authorization', 'cookie', 'proxy-authorization']);

function hasBody(ctx: Ctx): boolean {
  return (ctx.request.length ?? 0) > 0 || ctx.get('transfer-encoding') !== '' || ctx.get('content-type') !== '';
}

function routeContext(ctx: Ctx, prefix: string, body: unknown): PluginRouteContext {
  const headers: PluginRouteContext['headers'] = {};
  for (const [k, v] of Object.entries(ctx.headers)) if (!HIDDEN_HEADERS.has(k)) headers[k] = v;
  return {
    method: ctx.method,
    path: ctx.path.slice(prefix.length) || '/',
    params: { ...((ctx as unknown as { params?: Record<string, string> }).params ?? {}) },
    query: { ...ctx.query },
    headers,
    body,
    ...(ctx.state.tenant ? { tenantId: ctx.state.tenant.tenant_id } : {}),
  };
}

function isDetail(body: unknown): boolean {
  return !!body && typeof body === 'object' && typeof (body as { detail?: unknown }).detail === 'string';
}

function pluginRoute(plugin: string, r: PluginRoute, log: Logger): RouteSpec {
  const prefix = `${PLUGIN_ROUTE_PREFIX}/${plugin}`;
  const auth = r.auth !== false;
  return {
    method: r.method,
    path: prefix + r.path,
    summary: r.summary ?? `${r.method} ${r.path} of plugin ${plugin}`,
    tags: [`plugin:${plugin}`],
    auth,
    ...(auth ? { scope: r.scope ?? (r.method === 'GET' ? 'status' : 'run') } : {}),
    async handler(ctx, s) {
      const body = (r.method === 'POST' || r.method === 'PUT') && hasBody(ctx) ? await readJsonBody(ctx, { maxBytes: s.config.maxBodyBytes, maxDepth: s.config.maxJsonDepth }) : undefined;
      let answer: Awaited<ReturnType<PluginRoute['handler']>>;
      try {
        answer = await r.handler(routeContext(ctx, prefix, body));
      } catch (err) {
        log.error({ plugin, route: `${r.method} ${r.path}`, request_id: ctx.state.requestId, tenant_id: ctx.state.tenant?.tenant_id, err }, 'plugin route failed');
        throw new ServiceError('internal', `plugin '${plugin}' failed to answer (request id ${ctx.state.requestId})`);
      }
      const status = answer?.status ?? 200;
      if (!Number.isInteger(status) || status < 200 || status > 599) {
        log.error({ plugin, route: `${r.method} ${r.path}`, status }, 'plugin route answered an invalid status');
        throw new ServiceError('internal', `plugin '${plugin}' answered an invalid status (request id ${ctx.state.requestId})`);
      }
      for (const [k, v] of Object.entries(answer.headers ?? {})) if (typeof v === 'string' && !/^(set-cookie|content-length|transfer-encoding|connection)$/i.test(k)) ctx.set(k, v);
      ctx.status = status;
      ctx.body = status >= 400 && !isDetail(answer.body) ? { detail: `plugin '${plugin}' answered ${status}` } : (answer.body ?? null);
    },
  };
}

/** The routes every loaded plugin declared, as gateway routes. */
export function pluginRouteSpecs(registry: PluginRegistry, log: Logger): RouteSpec[] {
  return registry.routes().flatMap(({ plugin, routes }) => routes.map((r) => pluginRoute(plugin, r, log)));
}
