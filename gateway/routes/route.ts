// A route describes itself: method, path, auth, scope, body schema, docs. The
// app applies auth, scope and validation from these fields, and the OpenAPI
// document is built from the same list, so the two cannot drift.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { Ctx } from '../context.ts';
import { badRequest, notFound } from '../errors.ts';
import type { Scope } from '../http/tenants.ts';
import type { Services } from '../services.ts';

/** A path parameter of the matched route, as a string. */
export function param(ctx: Ctx, name: string): string {
  return String((ctx as unknown as { params?: Record<string, string> }).params?.[name] ?? '');
}

export interface RouteBody {
  /** schema file or `file#/$defs/Name` the body must satisfy */
  schema: string;
  /** runs when the schema refused the body (the schema says the same rule), for a message that names the rule */
  precheck?: (body: unknown) => void;
  /** byte cap of this route's body when it differs from SERVICE_MAX_BODY_BYTES (screenshots) */
  maxBytes?: (s: Services) => number;
}

export interface RouteSpec {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  summary: string;
  tags: string[];
  /** true: a tenant token; 'agent': the plane agents' secret as a bearer (agent registration) */
  auth: boolean | 'agent';
  /**
   * An OpenAI-compatible route (for clients such as the official SDKs): the
   * tenant token is also accepted as `Authorization: Bearer <token>`, and
   * errors carry OpenAI's {error: {message, type, code, param}} beside `detail`.
   */
  openai?: boolean;
  /** the tenant token is also accepted as `Authorization: Bearer <token>` (what MCP clients send), with {detail} errors as on every service route */
  bearer?: boolean;
  scope?: Scope;
  /** a browser may authenticate with `?ticket=` (a single-use ticket of POST /v1/ws-tickets) instead of X-Service-Token, when this says the request is one a browser cannot add a header to */
  ticket?: (ctx: Ctx) => boolean;
  body?: RouteBody;
  /** documented in OpenAPI: this route carries X-RateLimit-* headers */
  rateLimited?: boolean;
  /** left out of the OpenAPI document (asset routes) */
  hidden?: boolean;
  responses?: Record<string, string>;
  /** the success status when it is not 200 (201 created, 204 no content): the OpenAPI document names it; the handler sets ctx.status */
  status?: 201 | 204;
  /** the schema of the success body (`responses.schema.json#/$defs/Name`): documented in OpenAPI and checked by the contract tests */
  ok?: string;
  /** the 200 body's media types and their schemas, for a route that answers text, HTML or files (beside `ok`'s application/json) */
  content?: Record<string, Record<string, unknown>>;
  handler(ctx: Ctx, s: Services): Promise<void>;
}

/** A text or HTML body in the OpenAPI document. */
export const TEXT_BODY = { type: 'string' };
/** A file's bytes in the OpenAPI document (the 3.0 spelling, which 3.1 tools still read). */
export const BINARY_BODY = { type: 'string', format: 'binary' };

/** Streams a file the gateway wrote (a run's or a session's), or 404 with `missing` while there is none. */
export async function sendFile(ctx: Ctx, file: string, type: string, missing: string): Promise<void> {
  const info = await stat(file).catch(() => undefined);
  if (!info?.isFile()) throw notFound(missing);
  ctx.type = type;
  ctx.length = info.size;
  ctx.body = createReadStream(file);
}

/** A listing's page size: ?limit=, an integer from 1 to 100, default 20. */
/** A query parameter given at most once (400 naming it when repeated); empty is absent. */
export function queryOnce(ctx: Ctx, name: string): string | undefined {
  const v = ctx.query[name];
  if (Array.isArray(v)) throw badRequest(`${name} may be given once`, name);
  return v === undefined || v === '' ? undefined : v;
}

export function pageLimit(ctx: Ctx): number {
  const raw = queryOnce(ctx, 'limit');
  const limit = raw === undefined ? 20 : Number(raw);
  if (!/^\d{1,3}$/.test(raw ?? '20') || limit < 1 || limit > 100) throw badRequest('limit must be an integer from 1 to 100', 'limit');
  return limit;
}
