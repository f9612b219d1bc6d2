// The OpenAPI 3.1 document, built from the route declarations and the same
// JSON Schema files the validators compile. Each file's $defs are hoisted into
// components.schemas and every $ref is rewritten to point there.
import { SCHEMA_FILES, readSchema, type JsonSchema } from '../schemas/index.ts';
import type { RouteSpec } from './routes/route.ts';
import { PLUGIN_ROUTE_PREFIX } from './routes/plugins.ts';


function titleOf(file: string): string {
  const t = readSchema(file as (typeof SCHEMA_FILES)[number]).title;
  if (typeof t !== 'string') throw new Error(`${file} has no title`);
  return t;
}

/** Rewrites `#/$defs/X`, `file#/$defs/X` and `file` refs to components. */
function rewriteRefs(node: unknown, file: string, titles: Map<string, string>): unknown {
  if (Array.isArray(node)) return node.map((n) => rewriteRefs(n, file, titles));
  if (!node || typeof node !== 'object') return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node as Record<string, unknown>)) {
    if (k === '$ref' && typeof v === 'string') {
      const [target = '', frag = ''] = v.split('#');
      const def = /^\/\$defs\/(.+)$/.exec(frag)?.[1];
      if (def) out[k] = `#/components/schemas/${def}`;
      else out[k] = `#/components/schemas/${titles.get(target || file)}`;
    } else {
      out[k] = rewriteRefs(v, file, titles);
    }
  }
  return out;
}

export function componentSchemas(): Record<string, JsonSchema> {
  const titles = new Map<string, string>(SCHEMA_FILES.map((f) => [f, titleOf(f)]));
  const components: Record<string, JsonSchema> = {};
  const add = (name: string, schema: JsonSchema) => {
    if (components[name]) throw new Error(`schema name collision in OpenAPI components: ${name}`);
    components[name] = schema;
  };
  for (const file of SCHEMA_FILES) {
    const { $defs, $id: _id, $schema: _schema, ...root } = readSchema(file);
    add(titles.get(file)!, rewriteRefs(root, file, titles) as JsonSchema);
    for (const [name, def] of Object.entries(($defs ?? {}) as Record<string, unknown>)) {
      add(name, rewriteRefs(def, file, titles) as JsonSchema);
    }
  }
  components.Error = { type: 'object', required: ['detail'], properties: { detail: { type: 'string' } } };
  // the OpenAI-compatible routes: OpenAI's error object beside the spec's detail (the same text)
  components.OpenAiError = {
    type: 'object',
    required: ['detail', 'error'],
    properties: {
      detail: { type: 'string' },
      error: {
        type: 'object',
        required: ['message', 'type', 'code', 'param'],
        properties: { message: { type: 'string' }, type: { type: 'string' }, code: { type: ['string', 'null'] }, param: { type: ['string', 'null'] } },
      },
    },
  };
  return components;
}

/** `file` or `file#/$defs/Name` -> the component name it lands in. */
export function componentFor(ref: string): string {
  const [file = '', frag = ''] = ref.split('#');
  return /^\/\$defs\/(.+)$/.exec(frag)?.[1] ?? titleOf(file);
}

const ERROR_STATUSES: Record<string, string> = {
  '400': 'malformed request: {detail} names the field',
  '401': 'missing or unknown X-Service-Token',
  '403': 'missing scope, or a URL outside allowed_domains',
  '404': 'not found (or owned by another tenant)',
  '415': 'Content-Type is not application/json',
  '422': 'Idempotency-Key reused with a different body',
  '429': 'rate or concurrency limit',
  '500': 'internal error',
  '503': 'authentication not configured',
};

export function buildOpenApi(routes: RouteSpec[], version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    if (r.hidden) continue;
    // `:name` is one segment, `*name` the rest of the path
    const p = r.path.replace(/[:*]([A-Za-z_]+)/g, '{$1}');
    const params = [...r.path.matchAll(/[:*]([A-Za-z_]+)/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } }));
    const content: Record<string, { schema: unknown }> = {};
    if (r.ok) content['application/json'] = { schema: { $ref: `#/components/schemas/${componentFor(r.ok)}` } };
    for (const [type, schema] of Object.entries(r.content ?? {})) content[type] = { schema };
    const ok = String(r.status ?? 200);
    const responses: Record<string, unknown> = { [ok]: { description: r.responses?.[ok] ?? (ok === '204' ? 'done; no body' : 'success'), ...(Object.keys(content).length ? { content } : {}) } };
    const errorCodes = r.auth ? ['400', '401', '403', '404', '500', '503'] : [];
    if (r.body) errorCodes.push('415');
    if (r.rateLimited) errorCodes.push('422', '429');
    // statuses a route documents itself (a 502, a public route's 404) are errors too
    for (const code of Object.keys(r.responses ?? {})) if (Number(code) >= 400 && !errorCodes.includes(code)) errorCodes.push(code);
    const errorSchema = { $ref: `#/components/schemas/${r.openai ? 'OpenAiError' : 'Error'}` };
    for (const code of errorCodes.sort()) {
      responses[code] = { description: r.responses?.[code] ?? ERROR_STATUSES[code], content: { 'application/json': { schema: errorSchema } } };
    }
    const op: Record<string, unknown> = {
      summary: r.summary,
      tags: r.tags,
      operationId: `${r.method.toLowerCase()}${p.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
      responses,
    };
    if (params.length) op.parameters = params;
    // a public route says so: no security requirement at all
    op.security = !r.auth ? [] : r.auth === 'agent' ? [{ agentSecret: [] }] : r.ticket ? [{ serviceToken: [] }, { browserTicket: [] }] : [{ serviceToken: [] }];
    if (r.scope) op['x-required-scope'] = r.scope;
    if (r.body) {
      op.requestBody = { required: true, content: { 'application/json': { schema: { $ref: `#/components/schemas/${componentFor(r.body.schema)}` } } } };
    }
    (paths[p] ??= {})[r.method.toLowerCase()] = op;
  }
  const pluginTags = [...new Set(routes.flatMap((r) => r.tags).filter((t) => t.startsWith('plugin:')))].sort();
  return {
    openapi: '3.1.0',
    info: { title: 'runplane run service', version, description: 'Runs browser-automation plans on real browsers. Errors are {detail}.' },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    // relative: the document describes the gateway that serves it, wherever it is reached
    servers: [{ url: '/', description: 'this gateway' }],
    tags: [
      {
        name: 'plugins',
        description: `GET ${PLUGIN_ROUTE_PREFIX} lists the loaded plugins. Each plugin's own routes live under ${PLUGIN_ROUTE_PREFIX}/<name>/ (tag plugin:<name>), with the same X-Service-Token auth (a GET needs the status scope, other methods the run scope, unless the route declares its own) and {detail} errors.`,
      },
      ...pluginTags.map((t) => ({ name: t, description: `routes of the ${t.slice('plugin:'.length)} plugin, under ${PLUGIN_ROUTE_PREFIX}/${t.slice('plugin:'.length)}/` })),
    ],
    paths,
    components: {
      schemas: componentSchemas(),
      securitySchemes: {
        serviceToken: { type: 'apiKey', in: 'header', name: 'X-Service-Token' },
        browserTicket: { type: 'apiKey', in: 'query', name: 'ticket', description: 'a single-use, 30-second ticket from POST /v1/ws-tickets, for an EventSource (which cannot send headers); SSE requests only' },
        agentSecret: { type: 'http', scheme: 'bearer', description: "the plane agents' secret (SERVICE_PLANE_SECRET / PLANE_AGENT_SECRET), on the agent registration routes only" },
        platformApiKey: { type: 'apiKey', in: 'header', name: 'Authorization', description: 'Api-Key <GATEWAY_API_KEY>, on /production and /deployment/<id> routes only' },
      },
    },
  };
}
