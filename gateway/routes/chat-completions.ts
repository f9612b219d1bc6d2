// POST /v1/chat/completions: the OpenAI-compatible route for one brain step
// (also /production/sync/v1/chat/completions). The chat-completions body in:
// the last user message carries the screenshot (an image_url data: URL) and the
// task (its text), earlier assistant function calls are the action history.
// The action out as one function call in the OpenAI response shape (SSE
// chat.completion.chunk events when stream is true): the service's `act`
// function, or the caller's own when the request carries tools
// (chat-tools.ts). Declared `openai`: the tenant token may come as
// Authorization: Bearer, errors come as {detail, error: {message, type, code, param}},
// and a brain id no backend serves here is 404 model_not_found.
import { randomUUID } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { badRequest } from '../errors.ts';
import type { Action, Inference } from '../plugins/contract.ts';
import type { ChatCompletionRequest, ChatMessage } from '../../schemas/types.gen.ts';
import type { RouteSpec } from './route.ts';
import { frameOf, rateToken, turn } from './brains.ts';
import { actionArguments, callerFunctions, functionFor } from './chat-tools.ts';

const textOf = (m: ChatMessage): string => (typeof m.content === 'string' ? m.content : Array.isArray(m.content) ? m.content.filter((p) => p.type === 'text' && typeof p.text === 'string').map((p) => p.text).join('\n') : '');

/** The actions of earlier assistant calls of the action functions (the caller's loop history); unreadable ones are skipped. */
function historyOf(messages: ChatMessage[], names: Set<string>): Action[] {
  const out: Action[] = [];
  for (const m of messages) {
    if (m.role !== 'assistant') continue;
    for (const call of m.tool_calls ?? []) {
      if (!names.has(call.function.name)) continue;
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

function completion(id: string, out: Inference, fn: string, args: Record<string, unknown>) {
  return {
    id: `chatcmpl-${randomUUID()}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: id,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: out.reasoning || null, tool_calls: [{ id: `call_${randomUUID().replace(/-/g, '').slice(0, 24)}`, type: 'function', function: { name: fn, arguments: JSON.stringify(args) } }] },
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

export const chatRoutes: RouteSpec[] = [
  {
    method: 'POST',
    path: '/v1/chat/completions',
    ok: 'responses.schema.json#/$defs/ChatCompletion',
    summary: "OpenAI-compatible chat completions for one brain step (the action comes as a function call: `act`, or the caller's own function when tools are given; stream: true for SSE)",
    tags: ['brains'],
    auth: true,
    openai: true,
    scope: 'run',
    rateLimited: true,
    body: { schema: 'chat.schema.json', maxBytes: (s) => s.config.maxBrainBodyBytes },
    responses: {
      '200': 'chat.completion (or text/event-stream of chat.completion.chunk ending with data: [DONE])',
      '400': "{detail, error: {type: invalid_request_error}}: a malformed or oversized body, or tools that cannot carry the service's action",
      '401': '{detail, error: {code: invalid_api_key}}',
      '404': '{detail, error: {code: model_not_found}}: an id that is not accepted, or one no backend serves here',
      '429': '{detail, error: {code: rate_limit_exceeded}}; honour Retry-After',
      '502': '{detail, error: {type: server_error, code: upstream_unreachable}}: the brain upstream is unreachable, refused the call or answered without a usable action',
    },
    async handler(ctx, s) {
      const body = ctx.state.body as ChatCompletionRequest;
      const messages = body.messages as ChatMessage[];
      const user = [...messages].reverse().find((m) => m.role === 'user');
      const image = Array.isArray(user?.content) ? user.content.filter((p) => p.type === 'image_url').at(-1) : undefined;
      if (!image?.image_url) throw badRequest('messages: the last user message needs an image_url part with the screenshot as a data: URL', 'messages');
      if (!image.image_url.url.startsWith('data:image/')) throw badRequest('messages: image_url must be a data:image/... URL (the gateway fetches nothing)', 'messages');
      const task = textOf(user!).trim();
      if (!task) throw badRequest('messages: the last user message needs a text part with the task', 'messages');
      const fns = callerFunctions(body);
      const frame = await frameOf('messages image_url', image.image_url.url);
      const id = s.brains.selectServed(body.model);
      await rateToken(ctx, s);
      const out = await turn(ctx, s, id, frame, task, historyOf(messages, new Set(['act', ...(fns ?? []).map((f) => f.name)])));
      const args = actionArguments(out.action);
      const c = completion(id, out, fns ? functionFor(fns, args) : 'act', args);
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
