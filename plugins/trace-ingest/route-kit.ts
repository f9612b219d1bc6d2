// The shapes every ingest route shares (RouteDef, RouteCtx, Reply) and the
// small helpers their handlers use: integer params, schema checks, the run of
// an ingest call (DSN) or of a read (session cookie), file replies.
import { checkRecord, type TraceRecordKind } from '../../schemas/trace/index.ts';
import { unprocessable, type FilePart } from './http.ts';
import type { RunEntry } from './meta.ts';
import type { IngestService, Principal, Viewer } from './service.ts';

export type AuthKind = 'none' | 'dsn' | 'cookie' | 'admin';

export interface RouteCtx {
  params: Record<string, string>;
  query: Record<string, string>;
  body: unknown;
  parts?: FilePart[];
  principal?: Principal;
  viewer?: Viewer;
  signal: AbortSignal;
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
  method: 'GET' | 'POST' | 'PUT';
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
  handler(svc: IngestService, rc: RouteCtx): Promise<Reply>;
}

export const STEP_FILE = /^(\d{4})\.json$/;
export const KINDS = ['pre', 'post', 'target', 'diff'];
export const pad4 = (n: number): string => String(n).padStart(4, '0');

export function intParam(v: string | undefined, name: string): number {
  if (!v || !/^\d{1,6}$/.test(v)) throw unprocessable(`${name} must be a non-negative integer`);
  return Number(v);
}

export function validate(kind: TraceRecordKind, value: unknown, root = ''): void {
  const msg = checkRecord(kind, value, root);
  if (msg) throw unprocessable(msg);
}

export function obj(body: unknown, what = 'body'): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw unprocessable(`${what} must be a JSON object`);
  return body as Record<string, unknown>;
}

export function ingestRun(svc: IngestService, rc: RouteCtx): RunEntry {
  return svc.claimRun(rc.principal!.tenant.tenant_id, rc.params.run_id!).entry;
}

export function readRun(svc: IngestService, rc: RouteCtx): RunEntry {
  return svc.readableRun(rc.viewer!.tenant.tenant_id, rc.params.id!);
}

export const file = (svc: IngestService, rc: RouteCtx, rel: string, type: string) =>
  svc.read(readRun(svc, rc), rel).then((raw): Reply => ({ raw, type }));

export const jsonType = 'application/json; charset=utf-8';
