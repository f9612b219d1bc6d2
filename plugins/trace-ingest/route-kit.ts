// The shapes every ingest route shares (RouteDef, RouteCtx, Reply) and the
// small helpers their handlers use: integer params, schema checks, the run of
// an ingest call (DSN) or of a read (session cookie), file replies.
import { checkRecord, type TraceRecordKind } from '../../schemas/trace/index.ts';
import type { RecordCategory } from '../../sdk/categories.ts';
import { idProblem } from '../../shared/ids.ts';
import { IngestError, unprocessable, type FilePart } from './http.ts';
import type { RunEntry } from './meta.ts';
import type { IngestService, Principal, Viewer } from './service.ts';
import type { BatchScope } from './write-queue.ts';

export type AuthKind = 'none' | 'dsn' | 'cookie' | 'admin';

export interface RouteCtx {
  params: Record<string, string>;
  query: Record<string, string>;
  body: unknown;
  parts?: FilePart[];
  principal?: Principal;
  viewer?: Viewer;
  signal: AbortSignal;
  /** the route's record category, set before its handler runs (its writes count in that share of the queue) */
  category?: RecordCategory;
  /** inside a batch: the batch's scope (write-queue.ts) */
  batch?: BatchScope;
  /** origin of the request plus the mount prefix (for minted DSNs) */
  baseUrl: string;
  address: string;
}

export interface Reply {
  status?: number;
  body?: unknown;
  /** raw bytes or text with their content type */
  raw?: Buffer | string;
  type?: string;
  headers?: Record<string, string>;
  /** session changes the HTTP layer turns into cookies */
  login?: string;
  logout?: boolean;
  impersonate?: string | null;
}

export interface RouteDef {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  auth: AuthKind;
  body?: 'json' | 'multipart';
  /** trace schema of the JSON body (documented in OpenAPI; validated by the handler) */
  schema?: TraceRecordKind;
  summary: string;
  /** answered 202: a high-frequency ingest route */
  accepted?: boolean;
  /** the success statuses the handler answers when not just 200 (or 202 when accepted); the OpenAPI document lists these */
  ok?: number[];
  /** may appear inside POST /batch */
  batchable?: boolean;
  /**
   * Inside a batch, the next record starts once this one's write is queued (its
   * reply is awaited before the batch answers): the handler's only ordered effect
   * is that one write, so the records of a batch share commits and writer messages.
   */
  pipelined?: boolean;
  /** the rate-limit category of the records it takes (sdk/categories.ts); none: never limited (heartbeat, reads) */
  category?: RecordCategory;
  handler(svc: IngestService, rc: RouteCtx): Promise<Reply>;
}

export const STEP_FILE = /^(\d{4})\.json$/;
export const KINDS = ['pre', 'post', 'target', 'diff', 'intervention_before', 'intervention_after'];
export const pad4 = (n: number): string => String(n).padStart(4, '0');

/** Largest step index (six digits): in a path segment, a query or a body. */
export const STEP_INDEX_MAX = 999_999;
/** A model-io file name: <step:04d>-<layer>-<seq>.json or run-<layer>-<seq>.json (at most 49 characters). */
export const MODELIO_RELPATH = /^(\d{4}|run)-[a-z][a-z0-9_]{0,31}-\d{1,6}\.json$/;

/**
 * null when a path segment of an ingest route is within its documented limit,
 * else why not (never echoing the value): run_id and side_effect_id safe ids
 * (1-128 characters), step_index 0-999999, kind one of KINDS, relpath a
 * model-io file name. The HTTP layer answers 400 {detail} past a limit.
 */
export function pathParamProblem(name: string, value: string | undefined): string | null {
  switch (name) {
    case 'run_id':
    case 'side_effect_id':
      return idProblem(name, value);
    case 'step_index':
      return value && /^\d{1,6}$/.test(value) ? null : `step_index must be an integer 0-${STEP_INDEX_MAX} (at most 6 digits)`;
    case 'kind':
      return value && KINDS.includes(value) ? null : `screenshot kind must be one of ${KINDS.join(', ')}`;
    case 'relpath':
      return value && MODELIO_RELPATH.test(value) ? null : 'relpath must be <step:04d>-<layer>-<seq>.json or run-<layer>-<seq>.json (layer 1-32 of a-z, 0-9, _)';
    default:
      return null;
  }
}

/** A path segment or query value holding a step index or cursor (0-999999); else 400 {detail}. */
export function intParam(v: string | undefined, name: string): number {
  if (!v || !/^\d{1,6}$/.test(v)) throw new IngestError(400, `${name} must be an integer 0-${STEP_INDEX_MAX} (at most 6 digits)`);
  return Number(v);
}

/** A step_index in a JSON body: absent, or an integer 0-999999; else 422 {detail}. */
export function bodyStepIndex(v: unknown): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > STEP_INDEX_MAX) throw unprocessable(`step_index: must be an integer 0-${STEP_INDEX_MAX}`);
  return v as number;
}

export function validate(kind: TraceRecordKind, value: unknown, root = ''): void {
  const msg = checkRecord(kind, value, root);
  if (msg) throw unprocessable(msg);
}

export function obj(body: unknown, what = 'body'): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw unprocessable(`${what} must be a JSON object`);
  return body as Record<string, unknown>;
}

export async function ingestRun(svc: IngestService, rc: RouteCtx): Promise<RunEntry> {
  return (await svc.claimRun(rc.principal!.tenant.tenant_id, rc.params.run_id!)).entry;
}

export function readRun(svc: IngestService, rc: RouteCtx): Promise<RunEntry> {
  return svc.readableRun(rc.viewer!.tenant.tenant_id, rc.params.id!);
}

export const file = (svc: IngestService, rc: RouteCtx, rel: string, type: string) =>
  readRun(svc, rc).then((entry) => svc.read(entry, rel)).then((raw): Reply => ({ raw, type }));

export const jsonType = 'application/json; charset=utf-8';
