// Unauthenticated routes: liveness, readiness, version, models, metrics, the OpenAPI
// document and, when SERVICE_ENABLE_DOCS_UI is on, Swagger UI and Redoc served
// from their npm packages (no CDN).
import { createReadStream } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { DEPENDENCY_RETRY_AFTER_SECONDS, ServiceError, modelNotFound, notFound } from '../errors.ts';
import { versionBody } from '../version.ts';
import type { Ctx } from '../context.ts';
import type { Services } from '../services.ts';
import { TEXT_BODY, param, type RouteSpec } from './route.ts';

const require = createRequire(import.meta.url);

const ASSETS: Record<string, { file: () => string; type: string }> = {
  'swagger-ui.css': { file: () => path.join(path.dirname(require.resolve('swagger-ui-dist/package.json')), 'swagger-ui.css'), type: 'text/css' },
  'swagger-ui-bundle.js': { file: () => path.join(path.dirname(require.resolve('swagger-ui-dist/package.json')), 'swagger-ui-bundle.js'), type: 'application/javascript' },
  'redoc.standalone.js': { file: () => path.join(path.dirname(require.resolve('redoc/package.json')), 'bundles/redoc.standalone.js'), type: 'application/javascript' },
};

const CSP = "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; font-src 'self' data:";

const SWAGGER_HTML = `<!doctype html><html><head><meta charset="utf-8"><title>runplane API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head><body><div id="ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#ui' });</script></body></html>`;

const REDOC_HTML = `<!doctype html><html><head><meta charset="utf-8"><title>runplane API</title></head><body>
<div id="redoc"></div><script src="/docs/assets/redoc.standalone.js"></script>
<script>Redoc.init('/openapi.json', {}, document.getElementById('redoc'));</script></body></html>`;

function docsGate(ctx: Ctx, enabled: boolean): void {
  if (!enabled) throw notFound('the docs UI is disabled (SERVICE_ENABLE_DOCS_UI)');
  ctx.set('Content-Security-Policy', CSP);
}

function docsPage(path: string, summary: string, html: string): RouteSpec {
  return {
    method: 'GET',
    path,
    summary,
    tags: ['ops'],
    auth: false,
    content: { 'text/html': TEXT_BODY },
    responses: { '404': 'the docs UI is disabled (SERVICE_ENABLE_DOCS_UI)' },
    async handler(ctx, s) {
      docsGate(ctx, s.config.enableDocsUi);
      ctx.type = 'text/html';
      ctx.body = html;
    },
  };
}

const createdOf = (s: Services): number => Math.floor(Date.parse(s.version.started_at) / 1000);
const modelObject = (id: string, created: number, served: boolean) => ({ id, object: 'model', created, owned_by: 'runplane', served });

const health: RouteSpec['handler'] = async (ctx) => {
  ctx.body = { status: 'ok' };
};

// Readiness: can this replica serve requests that need its dependencies? 503
// names the one that is down, so an orchestrator takes the replica out of
// rotation while liveness (above) stays 200 and nobody restarts it for it.
const ready: RouteSpec['handler'] = async (ctx, s) => {
  const dependencies = await s.state.dependencies();
  const ok = Object.values(dependencies).every((d) => d.ok);
  ctx.status = ok ? 200 : 503;
  if (!ok) ctx.set('Retry-After', String(DEPENDENCY_RETRY_AFTER_SECONDS));
  ctx.set('Cache-Control', 'no-store');
  ctx.body = { status: ok ? 'ready' : 'unavailable', dependencies };
};

export const opsRoutes: RouteSpec[] = [
  { method: 'GET', path: '/health', summary: 'Liveness', tags: ['ops'], auth: false, ok: 'responses.schema.json#/$defs/Health', handler: health },
  { method: 'GET', path: '/v1/health', summary: 'Liveness', tags: ['ops'], auth: false, ok: 'responses.schema.json#/$defs/Health', handler: health },
  { method: 'GET', path: '/ready', summary: 'Readiness: each dependency (Redis) with ok and latency_ms; 503 when one is down', tags: ['ops'], auth: false, ok: 'responses.schema.json#/$defs/Readiness', handler: ready },
  { method: 'GET', path: '/v1/ready', summary: 'Readiness: each dependency (Redis) with ok and latency_ms; 503 when one is down', tags: ['ops'], auth: false, ok: 'responses.schema.json#/$defs/Readiness', handler: ready },
  {
    method: 'GET',
    path: '/v1/version',
    ok: 'responses.schema.json#/$defs/Version',
    summary: 'Runtime version snapshot',
    tags: ['ops'],
    auth: false,
    async handler(ctx, s) {
      ctx.body = versionBody(s.version);
    },
  },
  {
    method: 'GET',
    path: '/v1/models',
    ok: 'responses.schema.json#/$defs/ModelList',
    summary: 'The accepted brain ids (the spec\'s eight, then plugin brains), in the OpenAI list shape; `served` says whether a backend serves each on this deployment',
    tags: ['ops'],
    auth: false,
    openai: true,
    async handler(ctx, s) {
      const created = createdOf(s);
      const served = new Set(s.brains.configured());
      ctx.body = { object: 'list', data: s.brains.accepted().map((id) => modelObject(id, created, served.has(id))) };
    },
  },
  {
    method: 'GET',
    path: '/v1/models/:model',
    ok: 'responses.schema.json#/$defs/Model',
    summary: 'One accepted brain id, served here or not; 404 model_not_found for any other',
    tags: ['ops'],
    auth: false,
    openai: true,
    responses: { '200': '{id, object: model, created, owned_by, served}', '404': '{detail, error: {code: model_not_found}}' },
    async handler(ctx, s) {
      const id = param(ctx, 'model');
      if (!s.brains.accepted().includes(id)) throw modelNotFound(id);
      ctx.body = modelObject(id, createdOf(s), s.brains.configured().includes(id));
    },
  },
  {
    method: 'GET',
    path: '/metrics',
    summary: 'Prometheus metrics; 503 when the metrics library is missing',
    tags: ['ops'],
    auth: false,
    content: { 'text/plain': { ...TEXT_BODY, description: 'the Prometheus text exposition format, version 0.0.4' } },
    responses: { '503': 'the metrics library (prom-client) is not installed' },
    async handler(ctx, s) {
      if (!s.metrics.available) throw new ServiceError('unavailable', 'metrics are unavailable: the prom-client library is not installed');
      const m = await s.metrics.render();
      ctx.type = m.contentType;
      ctx.body = m.body;
    },
  },
  {
    method: 'GET',
    path: '/openapi.json',
    summary: 'OpenAPI 3.1 document of this service',
    tags: ['ops'],
    auth: false,
    content: { 'application/json': { type: 'object', required: ['openapi', 'info', 'paths'], description: 'an OpenAPI 3.1 document' } },
    async handler(ctx, s) {
      ctx.body = s.openapi();
    },
  },
  docsPage('/docs', 'Swagger UI (when SERVICE_ENABLE_DOCS_UI is on)', SWAGGER_HTML),
  docsPage('/redoc', 'Redoc (when SERVICE_ENABLE_DOCS_UI is on)', REDOC_HTML),
  {
    method: 'GET',
    path: '/docs/assets/:file',
    summary: 'Docs UI assets',
    tags: ['ops'],
    auth: false,
    hidden: true,
    async handler(ctx, s) {
      docsGate(ctx, s.config.enableDocsUi);
      const name = param(ctx, 'file');
      const asset = Object.hasOwn(ASSETS, name) ? ASSETS[name] : undefined;
      if (!asset) throw notFound('no such asset');
      ctx.type = asset.type;
      ctx.set('Cache-Control', 'public, max-age=86400');
      ctx.body = createReadStream(asset.file());
    },
  },
];
