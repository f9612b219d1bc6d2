// One catalogue of the agent's errors: HTTP status (the wire contract) and the gRPC
// status the same condition maps to. `detail` is always safe to show to a client.
import { status as GrpcStatus } from '@grpc/grpc-js';

export class PlaneError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(detail);
    this.name = 'PlaneError';
  }
}

export const badRequest = (detail: string): PlaneError => new PlaneError(400, detail);
export const unauthorized = (detail: string): PlaneError => new PlaneError(401, detail);
export const forbidden = (detail: string): PlaneError => new PlaneError(403, detail);
export const notFound = (detail: string): PlaneError => new PlaneError(404, detail);
export const methodNotAllowed = (detail: string): PlaneError => new PlaneError(405, detail);
export const conflict = (detail: string): PlaneError => new PlaneError(409, detail);
/** The session's browser (or display) is gone for good: start a new session. */
export const gone = (detail: string): PlaneError => new PlaneError(410, detail);
export const tooLarge = (detail: string): PlaneError => new PlaneError(413, detail);
export const unprocessable = (detail: string): PlaneError => new PlaneError(422, detail);
export const unavailable = (detail: string): PlaneError => new PlaneError(503, detail);
export const deadlineExceeded = (detail: string): PlaneError => new PlaneError(504, detail);

const GRPC_BY_HTTP: Record<number, GrpcStatus> = {
  400: GrpcStatus.INVALID_ARGUMENT,
  401: GrpcStatus.UNAUTHENTICATED,
  403: GrpcStatus.PERMISSION_DENIED,
  404: GrpcStatus.NOT_FOUND,
  405: GrpcStatus.UNIMPLEMENTED,
  409: GrpcStatus.ALREADY_EXISTS,
  410: GrpcStatus.ABORTED,
  413: GrpcStatus.RESOURCE_EXHAUSTED,
  422: GrpcStatus.FAILED_PRECONDITION,
  503: GrpcStatus.UNAVAILABLE,
  504: GrpcStatus.DEADLINE_EXCEEDED,
};

export function grpcStatusOf(httpStatus: number): GrpcStatus {
  return GRPC_BY_HTTP[httpStatus] ?? GrpcStatus.INTERNAL;
}

// Anything that is not a PlaneError is an internal fault: its message may carry paths
// or stack details, so the client only ever sees a generic detail.
export function toPlaneError(err: unknown): PlaneError {
  if (err instanceof PlaneError) return err;
  // the cause stays in the agent's log (stderr) for the operator, never in the answer
  const cause = err instanceof Error ? (err.stack ?? err.message) : String(err);
  process.stderr.write(`${JSON.stringify({ level: 50, time: Date.now(), msg: 'internal error in plane agent', err: cause.slice(0, 2000) })}\n`);
  return new PlaneError(500, 'internal error in plane agent');
}
