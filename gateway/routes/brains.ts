// The brain routes: one brain turn for a caller that runs its own loop.
//  - POST /v1/cua: the service's own body (screenshot, task, action_history,
//    screen_size) in, the mapped service action out; rate-limited; the
//    service's own route, so X-Service-Token and {detail} errors.
//  - POST /v1/chat/completions: the OpenAI-compatible route, in
//    chat-completions.ts, on the helpers here.
// Both pick the brain like a run does (SERVICE_MODEL, else the body's id) and
// bind it to the caller's tenant. A brain id no backend serves here is 404
// (model_not_found); an unreachable, refusing or garbling upstream is 502.
import { loadSharp } from '../../shared/load-once.ts';
import { ServiceError, badRequest, modelNotFound, modelNotServed } from '../errors.ts';
import { isBrainError, type Action, type Frame, type Inference } from '../plugins/contract.ts';
import type { CuaRequest } from '../../schemas/types.gen.ts';
import type { Ctx } from '../context.ts';
import type { Services } from '../services.ts';
import type { RouteSpec } from './route.ts';

/** Largest screenshot the brain routes decode (pixels): a small file may declare a huge image. */
const MAX_PIXELS = 40_000_000;

/** A screenshot from base64 (or a data: URL); 400 when it is not a whole image sharp can decode. */
export async function frameOf(field: string, data: string, url?: string): Promise<Frame> {
  const b64 = data.startsWith('data:') ? data.slice(data.indexOf(',') + 1) : data;
  if (!/^[A-Za-z0-9+/=\s]+$/.test(b64)) throw badRequest(`${field}: is not base64`);
  const image = Buffer.from(b64, 'base64');
  const sharp = await loadSharp();
  const meta = await sharp(image)
    .metadata()
    .catch(() => undefined);
  if (!meta?.width || !meta.height || !['png', 'jpeg', 'webp'].includes(meta.format ?? '')) throw badRequest(`${field}: is not a PNG, JPEG or WebP image`);
  if (meta.width * meta.height > MAX_PIXELS) throw badRequest(`${field}: ${meta.width}x${meta.height} is larger than ${MAX_PIXELS} pixels`);
  // decode it once (shrinking as it loads): a truncated or corrupt body is the caller's 400, not a brain's crash
  const whole = await sharp(image, { limitInputPixels: MAX_PIXELS })
    .resize(8, 8, { fit: 'fill' })
    .raw()
    .toBuffer()
    .then(
      () => true,
      () => false,
    );
  if (!whole) throw badRequest(`${field}: the image data is truncated or corrupt`);
  return { screenshot: { image, format: meta.format as 'png' | 'jpeg' | 'webp', width: meta.width, height: meta.height, scroll_y: 0, captured_at_ms: Date.now() }, ...(url ? { url } : {}) };
}

/** One turn of brain `id` for the request's tenant; brain failures become 502. */
export async function turn(ctx: Ctx, s: Services, id: string, frame: Frame, task: string, history: Action[], screen?: { width: number; height: number }): Promise<Inference> {
  const tenant = ctx.state.tenant!;
  const brain = s.brains.forTenant(id, tenant.tenant_id);
  if (!brain) throw s.brains.accepted().includes(id) ? modelNotServed(id) : modelNotFound(id);
  const size = screen ?? { width: frame.screenshot.width, height: frame.screenshot.height };
  const abort = new AbortController();
  const onClose = () => abort.abort(new Error('the caller went away'));
  ctx.req.once('close', onClose);
  try {
    return await brain.think([frame], task, history, size, abort.signal);
  } catch (err) {
    if (isBrainError(err)) {
      s.log.warn({ tenant_id: tenant.tenant_id, brain: id, code: err.code, err: err.message }, 'brain turn failed');
      throw new ServiceError('upstream_unreachable', `brain '${id}': ${err.message}`);
    }
    throw err;
  } finally {
    ctx.req.off('close', onClose);
  }
}

export async function rateToken(ctx: Ctx, s: Services): Promise<void> {
  const headers = await s.limits.takeRateToken(ctx.state.tenant!);
  if (headers) ctx.set({ ...headers });
}

export const brainRoutes: RouteSpec[] = [
  {
    method: 'POST',
    path: '/v1/cua',
    ok: 'responses.schema.json#/$defs/CuaAnswer',
    summary: 'One brain turn: screenshot, task and action history in, one service action out',
    tags: ['brains'],
    auth: true,
    scope: 'run',
    rateLimited: true,
    body: { schema: 'cua.schema.json', maxBytes: (s) => s.config.maxBrainBodyBytes },
    responses: { '200': '{action, reasoning, usage: {tokens_in, tokens_out, cost_usd}, model}', '429': 'rate limit; honour Retry-After', '502': 'the brain upstream is unreachable, refused the call or answered without a usable action' },
    async handler(ctx, s) {
      const body = ctx.state.body as CuaRequest;
      const frame = await frameOf('screenshot', body.screenshot, body.url);
      const id = s.brains.select(body.cua_model);
      await rateToken(ctx, s);
      const out = await turn(ctx, s, id, frame, body.task, (body.action_history ?? []) as Action[], body.screen_size);
      ctx.body = { action: out.action, reasoning: out.reasoning, usage: out.usage, model: id };
    },
  },
];
