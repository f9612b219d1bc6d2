// The OpenAPI 3.1 document of the ingest service, built from the route table
// and the trace schemas (their $refs rewritten to components).
import { TRACE_SCHEMA_FILES, readTraceSchema } from '../../schemas/trace/index.ts';
import { SDK_VERSION } from '../../sdk/util.ts';
import { KINDS, MODELIO_RELPATH, STEP_INDEX_MAX } from './route-kit.ts';
import { REPLIES } from './replies.ts';
import { ROUTES } from './routes.ts';

type Json = Record<string, unknown>;

function titleOf(file: string): string {
  return String(readTraceSchema(file as (typeof TRACE_SCHEMA_FILES)[number]).title);
}

function rewrite(node: unknown, currentFile: string): unknown {
  if (Array.isArray(node)) return node.map((n) => rewrite(n, currentFile));
  if (node === null || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node as Json)) {
    if (k === '$ref' && typeof v === 'string') {
      const [file, frag] = v.split('#');
      const target = file || currentFile;
      out.$ref = frag?.startsWith('/$defs/') ? `#/components/schemas/${frag.slice('/$defs/'.length)}` : `#/components/schemas/${titleOf(target)}`;
    } else if (k === '$defs' || k === '$id' || k === '$schema' || k === 'schema_version') {
      continue;
    } else out[k] = rewrite(v, currentFile);
  }
  return out;
}

/** What a route answers on success: its own list, else 202 for the high-frequency routes, 207 for the batch, 200. */
export function successStatuses(r: { path: string; accepted?: boolean; ok?: number[] }): number[] {
  return r.ok ?? [r.accepted ? 202 : r.path === '/batch' ? 207 : 200];
}

// Router paths name the run `:id` on reads and `:run_id` on ingest, and read a
// step as `:file` (NNNN.json): in OpenAPI 3.1 paths that differ only by a
// parameter's name are one path, so the document names each position once.
const DOC_PATHS: Record<string, string> = {
  '/runs/:id/steps/:file': '/runs/{run_id}/steps/{step}.json',
  '/runs/:id/events/:file': '/runs/{run_id}/events/{name}.jsonl',
  '/runs/:id/screenshots/:file': '/runs/{run_id}/screenshots/{name}.png',
};

const PARAM_SCHEMAS: Record<string, Json> = {
  step: { type: 'string', pattern: '^\\d{4}$', description: 'the step index as four digits' },
  step_index: { type: 'integer', minimum: 0, maximum: STEP_INDEX_MAX },
  kind: { enum: KINDS },
  relpath: { type: 'string', maxLength: 49, pattern: MODELIO_RELPATH.source, description: '<step:04d>-<layer>-<seq>.json or run-<layer>-<seq>.json' },
  name: { type: 'string', description: 'NNNN, run or reasoning for events; NNNN_<kind> for screenshots' },
};

export function docPath(routerPath: string): string {
  return DOC_PATHS[routerPath] ?? routerPath.replace(/:id\b/, ':run_id').replace(/:(\w+)/g, '{$1}').replace(/\*$/, '{relpath}');
}

export function buildOpenApi(prefix = ''): Json {
  const schemas: Json = {};
  for (const f of TRACE_SCHEMA_FILES) {
    const s = readTraceSchema(f);
    for (const [name, def] of Object.entries((s.$defs ?? {}) as Json)) schemas[name] = rewrite(def, f);
    if (f !== 'common.schema.json') schemas[String(s.title)] = { ...(rewrite(s, f) as Json), 'x-schema-version': s.schema_version };
  }
  schemas.Error = { type: 'object', required: ['detail'], properties: { detail: { type: 'string' } } };
  const paths: Json = {};
  const err = (d: string) => ({ description: d, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } });
  const tooMany = {
    ...err('a rate limit of the record category (per tenant) or the write queue (overall or the category\'s share) is spent; retry after Retry-After'),
    headers: {
      'Retry-After': { description: 'seconds to wait', schema: { type: 'integer', minimum: 0 } },
      'X-Trace-Rate-Limits': { description: '<seconds>:<category>[;<category>]:<scope>, several joined by ", " (categories step, event, screenshot, modelio; scope tenant or queue); absent when the whole queue is saturated', schema: { type: 'string' } },
    },
  };
  const all = [
    ...ROUTES,
    { method: 'POST', path: '/batch', auth: 'dsn', body: 'json', summary: 'Many ingest records of mixed kinds in one request ({requests: [{method, path, body}]}); screenshots in a multipart/form-data batch whose part `requests` names each image\'s part ({method, path, image: <part name>}); answered 207 with one result per record (our addition)' },
    { method: 'GET', path: '/healthz', auth: 'none', summary: 'Liveness' },
    { method: 'GET', path: '/metrics', auth: 'none', summary: 'Prometheus metrics (ingest queue depth ...)' },
  ] as Array<{ method: string; path: string; auth: string; body?: string; schema?: string; summary: string; accepted?: boolean; ok?: number[] }>;
  const SAFE_ID_PARAMS = new Set(['run_id', 'side_effect_id']);
  for (const r of all) {
    const p = docPath(r.path);
    // ids that name files or keys are safe ids (shared/ids.ts): 400 on an ingest route, 404 on a read
    const params = [...p.matchAll(/\{(\w+)\}/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: SAFE_ID_PARAMS.has(m[1]!) ? { $ref: '#/components/schemas/SafeId' } : PARAM_SCHEMAS[m[1]!] ?? { type: 'string' } }));
    const reply = REPLIES[`${r.method} ${r.path}`];
    if (!reply) throw new Error(`no reply documented for ${r.method} ${r.path} (plugins/trace-ingest/replies.ts)`);
    const success = { description: 'success', content: { [reply.type ?? 'application/json']: { schema: reply.schema } } };
    const op: Json = {
      summary: r.summary,
      parameters: params,
      security: r.auth === 'dsn' ? [{ dsn: [] }] : r.auth === 'none' ? [] : [{ session: [] }],
      responses: {
        ...Object.fromEntries(successStatuses(r).map((code) => [String(code), success])),
        ...(r.body || r.auth === 'dsn' ? { '400': err('malformed body, or a path segment past its limit (run_id, side_effect_id: safe ids of 1-128 characters; step_index 0-999999; kind; relpath)') } : {}),
        ...(r.auth === 'none' ? {} : { '401': err('missing or invalid credential'), '403': err('not allowed') }),
        '404': err('path or file absent'),
        ...(r.body ? { '413': err('body too large'), '415': err('wrong content type'), '422': err('payload failed validation') } : {}),
        ...(r.auth === 'dsn' ? { '429': tooMany } : {}),
      },
    };
    if (r.body === 'json') op.requestBody = { required: true, content: { 'application/json': { schema: r.schema ? { $ref: `#/components/schemas/${titleOf(`${r.schema}.schema.json`)}` } : { type: 'object' } } } };
    if (r.path === '/batch') {
      const item = { type: 'object', required: ['method', 'path'], properties: { method: { type: 'string' }, path: { type: 'string' }, body: {}, image: { type: 'string', description: 'multipart only: the name of the part holding this screenshot' } } };
      const requests = { type: 'object', required: ['requests'], properties: { requests: { type: 'array', maxItems: 1000, items: item } } };
      op.requestBody = { required: true, content: { 'application/json': { schema: requests }, 'multipart/form-data': { schema: { type: 'object', required: ['requests'], properties: { requests: requests }, additionalProperties: { type: 'string', contentMediaType: 'image/png' } }, encoding: { requests: { contentType: 'application/json' } } } } };
    }
    if (r.body === 'multipart') op.requestBody = { required: true, content: { 'multipart/form-data': { schema: { type: 'object', required: ['image'], properties: { image: { type: 'string', contentMediaType: 'image/png' } } } } } };
    ((paths[p] ??= {}) as Json)[r.method.toLowerCase()] = op;
  }
  return {
    openapi: '3.1.0',
    info: { title: 'runplane trace ingest', version: SDK_VERSION, description: 'Stores recorded agent runs (bundles) per tenant and serves them. Errors are {detail}.' },
    servers: [{ url: `${prefix}/api/v1` }],
    paths,
    components: {
      schemas,
      securitySchemes: {
        dsn: { type: 'http', scheme: 'bearer', description: 'the key inside the DSN' },
        session: { type: 'apiKey', in: 'cookie', name: 'trace_session' },
      },
    },
  };
}
