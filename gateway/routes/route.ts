// A route describes itself: method, path, auth, scope, body schema, docs. The
// app applies auth, scope and validation from these fields, and the OpenAPI
// document is built from the same list, so the two cannot drift.
import type { Ctx } from '../context.ts';
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
  scope?: Scope;
  /** a browser may authenticate with `?ticket=` (a single-use ticket of POST /v1/ws-tickets) instead of X-Service-Token, when this says the request is one a browser cannot add a header to */
  ticket?: (ctx: Ctx) => boolean;
  body?: RouteBody;
  /** documented in OpenAPI: this route carries X-RateLimit-* headers */
  rateLimited?: boolean;
  /** left out of the OpenAPI document (asset routes) */
  hidden?: boolean;
  responses?: Record<string, string>;
  /** the schema of the 200 body (`responses.schema.json#/$defs/Name`): documented in OpenAPI and checked by the contract tests */
  ok?: string;
  /** the 200 body's media types and their schemas, for a route that answers text, HTML or files (beside `ok`'s application/json) */
  content?: Record<string, Record<string, unknown>>;
  handler(ctx: Ctx, s: Services): Promise<void>;
}

/** A text or HTML body in the OpenAPI document. */
export const TEXT_BODY = { type: 'string' };
/** A file's bytes in the OpenAPI document (the 3.0 spelling, which 3.1 tools still read). */
export const BINARY_BODY = { type: 'string', format: 'binary' };
