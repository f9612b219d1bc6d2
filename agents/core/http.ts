// The spec's HTTP wire contract over the core: JSON in (size-capped), JSON out,
// errors as {detail} with the catalogue's status; never a stack trace.
import Koa from 'koa';
import getRawBody from 'raw-body';
import { badRequest, toPlaneError, tooLarge, unauthorized } from './errors.ts';
import { safeEqual, type PlaneCore } from './core.ts';

export const MAX_BODY_BYTES = 1024 * 1024;

export interface HttpOptions {
  secret?: string;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
}

export function bearerOk(header: string | undefined, secret: string | undefined): boolean {
  if (!secret) return true;
  const m = /^Bearer (.+)$/.exec(header ?? '');
  return m !== null && safeEqual(m[1] ?? '', secret);
}

async function readJson(ctx: Koa.Context): Promise<unknown> {
  if (ctx.method === 'GET') return {};
  let raw: string;
  try {
    raw = await getRawBody(ctx.req, { limit: MAX_BODY_BYTES, encoding: 'utf8' });
  } catch (err) {
    if ((err as { type?: string }).type === 'entity.too.large') throw tooLarge(`body over ${MAX_BODY_BYTES} bytes`);
    throw badRequest('could not read request body');
  }
  if (raw.trim() === '') return {};
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    throw badRequest('malformed JSON body');
  }
}

export function httpApp(core: PlaneCore, opts: HttpOptions = {}): Koa {
  const app = new Koa();
  app.use(async (ctx) => {
    try {
      if (!bearerOk(ctx.get('authorization') || undefined, opts.secret)) throw unauthorized('missing or wrong agent secret');
      const method = ctx.path.replace(/^\/+|\/+$/g, '');
      const verb = ctx.method === 'GET' || ctx.method === 'HEAD' ? 'GET' : ctx.method === 'POST' ? 'POST' : undefined;
      if (!verb) {
        ctx.status = 405;
        ctx.body = { detail: `${ctx.method} is not supported` };
        return;
      }
      if (!core.routeVerb(method)) {
        ctx.status = 404;
        ctx.body = { detail: `route /${method} is not served by ${core.factory.backend}` };
        return;
      }
      const body = await readJson(ctx);
      const result = await core.call({ method, verb, sessionToken: ctx.get('x-service-session') || undefined, body });
      if (result.blob && result.rawContentType) {
        ctx.status = 200;
        ctx.type = result.rawContentType;
        ctx.body = result.blob;
        return;
      }
      const out: Record<string, unknown> = { ...result.body };
      if (result.blob) out[result.blobField ?? 'image_b64'] = result.blob.toString('base64');
      ctx.status = 200;
      ctx.body = out;
    } catch (err) {
      const pe = toPlaneError(err);
      if (pe.status >= 500) opts.log?.('request failed', { path: ctx.path, status: pe.status, err: String(err) });
      ctx.status = pe.status;
      ctx.body = { detail: pe.detail };
    }
  });
  return app;
}
