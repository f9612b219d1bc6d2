// Gives each request an id: the caller's X-Request-Id when it is a sane token,
// else a fresh UUID. Echoed on the response so a caller can quote it.
import { randomUUID } from 'node:crypto';
import type { Ctx, Next } from '../context.ts';

const SAFE_ID = /^[A-Za-z0-9._-]{1,128}$/;

export function requestId() {
  return async (ctx: Ctx, next: Next) => {
    const given = ctx.get('x-request-id');
    ctx.state.requestId = SAFE_ID.test(given) ? given : randomUUID();
    ctx.state.originalPath = ctx.path;
    ctx.set('X-Request-Id', ctx.state.requestId);
    await next();
  };
}
