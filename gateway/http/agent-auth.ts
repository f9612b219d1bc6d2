// Plane agents announce themselves with the deployment's agent secret
// (SERVICE_PLANE_SECRET, the one the gateway sends them) as a bearer token: a
// tenant token can never register an address the gateway would then connect to.
// Without a secret the routes do not exist (404): an open registration would let
// anyone point runs, and their pages, at a host of their choosing.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Next } from 'koa';
import type { Ctx } from '../context.ts';
import { notFound, ServiceError } from '../errors.ts';

const sha = (s: string): Buffer => createHash('sha256').update(s).digest();

export function agentAuth(secret: string | undefined) {
  const expected = secret ? sha(secret) : undefined;
  return async (ctx: Ctx, next: Next): Promise<void> => {
    if (!expected) throw notFound('plane registration is off: the gateway has no SERVICE_PLANE_SECRET');
    const m = /^Bearer\s+(.+)$/i.exec(ctx.get('authorization'));
    // digests of equal length: the comparison's time says nothing of the secret
    if (!m || !timingSafeEqual(sha(m[1]!.trim()), expected)) {
      throw new ServiceError('unauthenticated', 'missing or invalid Authorization: Bearer <agent secret>', { 'WWW-Authenticate': 'Bearer' });
    }
    return next();
  };
}
