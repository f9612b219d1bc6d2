// Turns every failure into {detail} with the right status, with OpenAI's
// {error: {message, type, code, param}} beside it when the matched route declares
// `openai` (its chain marks ctx.state.errorShape). A ServiceError's detail is
// safe to show; a dependency that cannot be reached (Redis, PostgreSQL) is 503 with
// Retry-After; anything else is logged with its stack and answered with a
// generic 500.
import type { Logger } from '../log.ts';
import { dependencyUnavailable, isServiceError, type ErrorClass, type ServiceError } from '../errors.ts';
import { unreachableDependency } from '../state/backend.ts';
import type { Ctx, Next } from '../context.ts';
import { openAiError } from './openai-errors.ts';
import { drain } from './body.ts';

/**
 * A request refused before its body was read (auth, scope, limits) leaves that
 * body on a kept-alive connection, and node closed such a connection after the
 * answer without saying so: a client reusing it got a reset. The body is read
 * and dropped (bounded, as body.ts does for one past the cap); when it could not
 * be, the answer says `Connection: close` so the client opens a new one.
 */
async function settleUnreadBody(ctx: Ctx): Promise<void> {
  const req = ctx.req;
  if (req.complete || !(Number(req.headers['content-length']) > 0 || req.headers['transfer-encoding'])) return;
  // only a small body is read: a refused caller (no token, say) must not hold the answer,
  // nor make the gateway read megabytes, to keep its connection
  const length = Number(req.headers['content-length']);
  if (Number.isFinite(length) && length <= REFUSED_DRAIN_BYTES) await drain(req, REFUSED_DRAIN_BYTES, REFUSED_DRAIN_MS);
  if (!req.complete) ctx.set('Connection', 'close');
}

/** The most of a refused request's unread body read to keep its connection, and for how long. */
const REFUSED_DRAIN_BYTES = 1024 * 1024;
const REFUSED_DRAIN_MS = 2000;

function answer(ctx: Ctx, status: number, message: string, errorClass?: ErrorClass, param: string | null = null): void {
  ctx.status = status;
  ctx.body = ctx.state.errorShape === 'openai' ? openAiError(status, message, errorClass, param) : { detail: message };
}

/** The 503 of a dependency that went away (the client's to retry, not a bug of ours), or undefined. */
export function dependencyError(err: unknown): ServiceError | undefined {
  const dependency = unreachableDependency(err);
  return dependency ? dependencyUnavailable(dependency) : undefined;
}

export function errorBodies(log: Logger) {
  return async (ctx: Ctx, next: Next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        ctx.status = 404;
        ctx.body = { detail: `no route for ${ctx.method} ${ctx.state.originalPath ?? ctx.path}` };
      }
    } catch (caught) {
      const down = dependencyError(caught);
      if (down) log.warn({ request_id: ctx.state.requestId, err: (caught as Error).message }, down.detail);
      const err = down ?? caught;
      if (isServiceError(err)) {
        ctx.set(err.headers);
        answer(ctx, err.status, err.detail, err.errorClass, err.param);
        return;
      }
      const e = err as { status?: unknown; expose?: unknown; message?: unknown };
      // koa / http-errors raised by libraries: 4xx with expose are safe to show
      if (typeof e.status === 'number' && e.status >= 400 && e.status < 500 && e.expose === true) {
        answer(ctx, e.status, String(e.message));
        return;
      }
      log.error({ err, request_id: ctx.state.requestId, tenant_id: ctx.state.tenant?.tenant_id }, 'unhandled error');
      answer(ctx, 500, `internal error (request id ${ctx.state.requestId})`, 'internal');
    } finally {
      if (ctx.status >= 400) await settleUnreadBody(ctx);
    }
  };
}
