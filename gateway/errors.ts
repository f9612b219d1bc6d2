// The one catalogue of errors the gateway answers with. Each carries an HTTP
// status, a stable class from the spec's taxonomy and a `detail` that is safe to
// show. The error middleware writes it as {detail}, with OpenAI's
// {error: {message, type, code, param}} beside it on routes that declare `openai`
// (http/openai-errors.ts maps each class). Anything that is not a ServiceError becomes a generic 500 whose cause is
// logged, never returned.

export type ErrorClass =
  | 'bad_request'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  | 'model_not_found'
  | 'method_not_allowed'
  | 'conflict'
  | 'gone'
  | 'profile_busy'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'idempotency_mismatch'
  | 'unprocessable'
  | 'rate_limited'
  | 'concurrency_limited'
  | 'internal'
  | 'persist_failed'
  | 'upstream_unreachable'
  | 'auth_not_configured'
  | 'unavailable';

const STATUS: Record<ErrorClass, number> = {
  bad_request: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  model_not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  gone: 410,
  profile_busy: 409,
  payload_too_large: 400,
  unsupported_media_type: 415,
  idempotency_mismatch: 422,
  unprocessable: 422,
  rate_limited: 429,
  concurrency_limited: 429,
  internal: 500,
  persist_failed: 500,
  upstream_unreachable: 502,
  auth_not_configured: 503,
  unavailable: 503,
};

export class ServiceError extends Error {
  readonly status: number;
  readonly errorClass: ErrorClass;
  readonly headers: Record<string, string>;
  /** the request field at fault, when one is (OpenAI-shaped errors carry it as `param`) */
  readonly param: string | null;

  constructor(errorClass: ErrorClass, detail: string, headers: Record<string, string> = {}, param: string | null = null) {
    super(detail);
    this.name = 'ServiceError';
    this.errorClass = errorClass;
    this.status = STATUS[errorClass];
    this.headers = headers;
    this.param = param;
  }

  get detail(): string {
    return this.message;
  }
}

export const badRequest = (detail: string, param: string | null = null) => new ServiceError('bad_request', detail, {}, param);
export const notFound = (detail = 'not found') => new ServiceError('not_found', detail);
/** 404 model_not_found: an id the service does not accept (GET /v1/models lists those it does). */
export const modelNotFound = (id: string, param: string | null = 'model') =>
  new ServiceError('model_not_found', `the model '${id.slice(0, 64)}' is not an accepted id; GET /v1/models lists the accepted ids`, {}, param);
/** 404 model_not_found: an accepted id no backend serves on this deployment (`served: false` on GET /v1/models). */
export const modelNotServed = (id: string, param: string | null = 'model', why = '') =>
  new ServiceError('model_not_found', `${why}the model '${id.slice(0, 64)}' is accepted but not served by this deployment (no backend is configured for it); GET /v1/models lists the accepted ids, with served: true on those served here`, {}, param);
/** 422: a well-formed request this deployment cannot carry out as asked (a plan step nothing here can serve). */
export const unprocessable = (detail: string, param: string | null = null) => new ServiceError('unprocessable', detail, {}, param);
/** 410: a one-time thing that was real and is over (a takeover link that expired or ended). */
export const gone = (detail: string) => new ServiceError('gone', detail);
export const conflict = (detail: string) => new ServiceError('conflict', detail);
export const forbidden = (detail: string) => new ServiceError('forbidden', detail);
export const unauthenticated = (detail: string) => new ServiceError('unauthenticated', detail);

/** Seconds a client should wait before retrying a request refused because a dependency is down. */
export const DEPENDENCY_RETRY_AFTER_SECONDS = 5;

/**
 * A dependency the request needs (Redis today, PostgreSQL later) cannot be
 * reached: 503 with Retry-After, never a 500. Nothing was applied.
 */
export const dependencyUnavailable = (dependency: string) =>
  new ServiceError('unavailable', `${dependency} is unavailable, retry later`, { 'Retry-After': String(DEPENDENCY_RETRY_AFTER_SECONDS) });

export function isServiceError(err: unknown): err is ServiceError {
  return err instanceof ServiceError;
}
