// The platform route families. /production/predict and
// /deployment/<id>/predict reach the predict handler; .../sync/<path> reaches
// <path> inside. When GATEWAY_API_KEY is set these families also need
// `Authorization: Api-Key <key>`; the inner route's own auth still applies.
// A refusal here takes the error shape of the inner route (OpenAI's for the
// `openai` routes), so an OpenAI SDK behind the platform can read it.
import { hash, timingSafeEqual } from 'node:crypto';
import { ServiceError, notFound } from '../errors.ts';
import type { Ctx, Next } from '../context.ts';

const FAMILY = /^\/(?:production|deployment\/([^/]+))(\/.*)?$/;
const DEPLOYMENT_ID = /^[A-Za-z0-9_-]{1,64}$/;

const sha = (s: string) => hash('sha256', s, 'buffer');

export function platformRoutes(apiKey: string | undefined, errorShapeOf: (method: string, path: string) => 'openai' | undefined = () => undefined) {
  const expected = apiKey ? sha(apiKey) : undefined;
  return async (ctx: Ctx, next: Next) => {
    const m = FAMILY.exec(ctx.path);
    if (!m) return next();
    const [, deploymentId, rest = ''] = m;
    if (deploymentId !== undefined && !DEPLOYMENT_ID.test(deploymentId)) throw notFound('unknown deployment');
    let inner: string;
    if (rest === '/predict') inner = '/v1/predict';
    else if (rest.startsWith('/sync/') && rest.length > '/sync/'.length) inner = rest.slice('/sync'.length);
    else throw notFound(`no route for ${ctx.method} ${ctx.path}`);
    if (FAMILY.test(inner)) throw notFound('platform routes do not nest');
    const shape = errorShapeOf(ctx.method, inner);
    if (shape) ctx.state.errorShape = shape;
    if (expected) {
      const header = ctx.get('authorization');
      const m2 = /^Api-Key\s+(.+)$/i.exec(header);
      if (!m2 || !timingSafeEqual(sha(m2[1]!.trim()), expected)) {
        throw new ServiceError('unauthenticated', 'missing or invalid Authorization: Api-Key header', { 'WWW-Authenticate': 'Api-Key' });
      }
    }
    ctx.path = inner;
    return next();
  };
}
