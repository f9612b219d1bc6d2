// The brain routes: one brain turn for a caller that runs its own loop.
//  - POST /v1/cua: the service's own body (screenshot, task, action_history,
//    screen_size) in, the mapped service action out; rate-limited.
//  - POST /v1/chat/completions: the OpenAI chat-completions body in, the
//    action as an `act` tool call in the OpenAI response shape out (SSE chunks
//    when stream is true); also reachable as /production/sync/v1/chat/completions.
// Both pick the brain like a run does (SERVICE_MODEL, else the body's id) and
// bind it to the caller's tenant. An unreachable, refusing or garbling
// upstream is 502 {detail}.
import { randomUUID } from 'node:crypto';
import { PassThrough } from 'node:stream';
import sharp from 'sharp';
import { ServiceError, badRequest } from '../errors.ts';
import { isBrainError, type Action, type Frame, type Inference } from '../plugins/contract.ts';
import type { ChatCompletionRequest, ChatMessage, CuaRequest } from '../../schemas/types.gen.ts';
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
async function turn(ctx: Ctx, s: Services, id: string, frame: Frame, task: string, history: Action[], screen?: { width: number; height: number }): Promise<Inference> {
  const tenant = ctx.state.tenant!;
  const brain = s.brains.forTenant(id, tenant.tenant_id);
  if (!brain) throw new ServiceError('upstream_unreachable', `brain '${id}' is not configured on this deployment`);
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

async function rateToken(ctx: Ctx, s: Services): Promise<void> {
  const headers = await s.limits.takeRateToken(ctx.state.tenant!);
  if (headers) ctx.set({ ...headers });
}

// ------------------------------------------------------------ chat completions

const textOf = (m: ChatMessage): string => (typeof m.content === 'string' ? m.content : Array.isArray(m.content) ? m.content.filter((p) => p.type === 'text' && typeof p.text === 'string').map((p) => p.text).join('\n') : '');

/** The action of an earlier assistant `act` tool call (the caller's loop history); unreadable ones are skipped. */
function historyOf(messages: ChatMessage[]): Action[] {
  const out: Action[] = [];
  for (const m of messages) {
    if (m.role !== 'assistant') continue;
    for (const call of m.tool_calls ?? []) {
      if (call.function.name !== 'act') continue;
      try {
        const { action, reasoning: _r, ...params } = JSON.parse(call.function.arguments ?? '{}') as Record<string, unknown>;
        if (typeof action === 'string') out.push({ type: action, ...params } as Action);
      } catch {
        // not JSON: nothing to learn from it
      }
    }
  }
  return out;
}

function completion(id: string, out: Inference) {
  const { type, ...params } = out.action;
  return {
    id: `chatcmpl-${randomUUID()}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: id,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: out.reasoning || null, tool_calls: [{ id: `call_${randomUUID().replace(/-/g, '').slice(0, 24)}`, type: 'function', function: { name: 'act', arguments: JSON.stringify({ action: type, ...params }) } }] },
        finish_reason: 'tool_calls',
      },
    ],
    usage: { prompt_tokens: out.usage.tokens_in, completion_tokens: out.usage.tokens_out, total_tokens: out.usage.tokens_in + out.usage.tokens_out },
  };
}

/** The same completion as chat.completion.chunk events: role and reasoning, the tool call, the finish, usage, [DONE]. */
function chunks(c: ReturnType<typeof completion>): string {
  const base = { id: c.id, object: 'chat.completion.chunk', created: c.created, model: c.model };
  const msg = c.choices[0]!.message;
  const call = msg.tool_calls[0]!;
  const events = [
    { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: msg.content ?? '' }, finish_reason: null }] },
    { ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: call.id, type: 'function', function: { name: call.function.name, arguments: call.function.arguments } }] }, finish_reason: null }] },
    { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }], usage: c.usage },
  ];
  return events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('') + 'data: [DONE]\n\n';
}

export const brainRoutes: RouteSpec[] = [
  {
    method: 'POST',
    path: '/v1/cua',
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
  {
    method: 'POST',
    path: '/v1/chat/completions',
    summary: 'OpenAI-compatible chat completions for one brain step (the action comes as an `act` tool call; stream: true for SSE)',
    tags: ['brains'],
    auth: true,
    scope: 'run',
    rateLimited: true,
    body: { schema: 'chat.schema.json', maxBytes: (s) => s.config.maxBrainBodyBytes },
    responses: { '200': 'chat.completion (or text/event-stream of chat.completion.chunk ending with data: [DONE])', '502': 'the brain upstream is unreachable, refused the call or answered without a usable action' },
    async handler(ctx, s) {
      const body = ctx.state.body as ChatCompletionRequest;
      const messages = body.messages as ChatMessage[];
      const user = [...messages].reverse().find((m) => m.role === 'user');
      const image = Array.isArray(user?.content) ? user.content.filter((p) => p.type === 'image_url').at(-1) : undefined;
      if (!image?.image_url) throw badRequest('messages: the last user message needs an image_url part with the screenshot as a data: URL');
      if (!image.image_url.url.startsWith('data:image/')) throw badRequest('messages: image_url must be a data:image/... URL (the gateway fetches nothing)');
      const task = textOf(user!).trim();
      if (!task) throw badRequest('messages: the last user message needs a text part with the task');
      const frame = await frameOf('messages image_url', image.image_url.url);
      const id = s.brains.select(body.model);
      await rateToken(ctx, s);
      const out = await turn(ctx, s, id, frame, task, historyOf(messages));
      const c = completion(id, out);
      if (!body.stream) {
        ctx.body = c;
        return;
      }
      ctx.status = 200;
      ctx.type = 'text/event-stream';
      ctx.set('Cache-Control', 'no-cache');
      const stream = new PassThrough();
      ctx.body = stream;
      stream.end(chunks(c));
    },
  },
];
