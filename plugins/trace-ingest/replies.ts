// What each operation answers on success, for the OpenAPI document: a JSON
// schema or a media type per `METHOD path` (router paths). Kept apart from the
// handlers so the route table stays readable; test/trace/openapi.test.ts
// checks every route has an entry and that the answers match.
type Json = Record<string, unknown>;

export interface ReplyDoc {
  /** media type of the success body (default application/json) */
  type?: string;
  schema: Json;
}

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const obj = (props: Record<string, Json>, required = Object.keys(props)): Json => ({ type: 'object', required, properties: props });
const str: Json = { type: 'string' };
const int: Json = { type: 'integer', minimum: 0 };
const bool: Json = { type: 'boolean' };
const anyObj: Json = { type: 'object' };
const stored = obj({ stored: str });
const accepted = obj({ accepted: int });
const list = (key: string, item: Json = anyObj): Json => obj({ [key]: { type: 'array', items: item } });
const user = obj({ user_id: str, email: str, is_admin: bool });

export const REPLIES: Record<string, ReplyDoc> = {
  // ingest (DSN)
  'POST /runs': { schema: obj({ run_id: str, created: bool }) },
  'PUT /runs/:run_id/trace': { schema: obj({ run_id: str, steps: int }) },
  'PUT /runs/:run_id/steps/:step_index': { schema: stored },
  'PUT /runs/:run_id/costs': { schema: obj({ run_id: str }) },
  'POST /runs/:run_id/events': { schema: accepted },
  'POST /runs/:run_id/screenshots/:step_index/:kind': { schema: stored },
  'POST /runs/:run_id/modelio/:relpath': { schema: stored },
  'POST /runs/:run_id/logs': { schema: obj({ log: str }) },
  'POST /runs/:run_id/steps/:step_index/judge-decisions': { schema: accepted },
  'POST /runs/:run_id/reasoning': { schema: accepted },
  'PUT /runs/:run_id/side-effects/:side_effect_id': { schema: stored },
  'POST /runs/:run_id/outcomes': { schema: accepted },
  'POST /runs/:run_id/eval-candidates': { schema: obj({ added: bool }) },
  'PUT /runs/:run_id/findings': { schema: stored },
  'PUT /runs/:run_id/preferences/:step_index': { schema: stored },
  'POST /heartbeat': { schema: obj({ ok: bool }) },
  'GET /runs/:run_id/commands': { schema: obj({ commands: { type: 'array', items: anyObj }, cursor: int }) },
  'POST /batch': { schema: obj({ results: { type: 'array', items: obj({ index: int, status: { type: 'integer' }, body: anyObj, detail: str, retry_after: int, rate_limits: str }, ['index', 'status']) } }) },
  // reads (session cookie)
  'POST /auth/login': { schema: obj({ user, tenant_id: str }) },
  'POST /auth/logout': { schema: obj({ ok: bool }) },
  'GET /auth/me': { schema: obj({ user, tenant: anyObj, home_tenant: anyObj, impersonating: bool }) },
  'GET /runs': { schema: obj({ runs: { type: 'array', items: anyObj }, next_cursor: { type: ['string', 'null'] } }) },
  'GET /runs/:id/manifest.json': { schema: ref('Manifest') },
  'GET /runs/:id/trace.json': { schema: ref('TraceDocument') },
  'GET /runs/:id/steps/:file': { schema: ref('StepRecord') },
  'GET /runs/:id/events/:file': { type: 'application/x-ndjson', schema: { type: 'string', description: 'one DecisionEvent (or reasoning record) per line' } },
  'GET /runs/:id/screenshots/:file': { type: 'image/png', schema: { type: 'string', contentMediaType: 'image/png' } },
  'GET /runs/:id/diagnostics/findings.json': { schema: ref('DiagnosticFindings') },
  'GET /runs/:id/files': { schema: list('files', str) },
  'GET /runs/:id/files/*': { type: 'application/octet-stream', schema: { type: 'string', description: 'the file bytes, with the content type of its extension' } },
  'GET /runs/:id/reward': { schema: obj({ run_id: str, reward: { type: ['number', 'null'] }, source: { enum: ['outcome', 'step_scores', 'none'] }, steps_scored: int, step_mean: { type: ['number', 'null'] }, components: anyObj }) },
  'POST /preferences': { schema: anyObj },
  'GET /preferences': { schema: list('preferences') },
  'POST /runs/:id/commands': { schema: obj({ command_id: str, seq: int, type: str }, ['command_id', 'seq', 'type']) },
  'GET /connections': { schema: obj({ window_seconds: int, connections: { type: 'array', items: anyObj } }) },
  'GET /tenant/dsns': { schema: list('dsns') },
  'POST /tenant/dsns': { schema: obj({ dsn_id: str, tenant_id: str, name: str, key_prefix: str, created_at: str, key: str, dsn: str }) },
  'GET /admin/tenants': { schema: list('tenants') },
  'POST /admin/dsns/:dsn_id/revoke': { schema: obj({ dsn_id: str, tenant_id: str, name: str, key_prefix: str, created_at: str, last_used_at: { type: ['string', 'null'] }, revoked_at: str }) },
  'DELETE /admin/users/:user_id': { schema: obj({ user_id: str, email: str, tenant_id: str, is_admin: bool, created_at: str }) },
  'POST /admin/impersonate': { schema: obj({ impersonating: bool, tenant: anyObj }) },
  // service
  'GET /healthz': { schema: obj({ status: str, queue_depth: int }) },
  'GET /metrics': { type: 'text/plain; version=0.0.4', schema: { type: 'string', description: 'Prometheus text exposition' } },
};
