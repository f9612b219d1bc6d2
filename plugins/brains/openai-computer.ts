// openai-computer: OpenAI's computer_use_preview tool through the official SDK
// (openai, Responses API). One step is one chain of responses: the task and
// the screen first, then each computer_call answered by a computer_call_output
// with the screenshot taken after the plane acted, linked by
// previous_response_id, truncation 'auto'. A computer_call with
// pending_safety_checks is never acknowledged by the service: where the run lets
// its brain ask for a person (runtime.brain_may_ask_human) the brain answers
// ASK_HUMAN and the checks go back acknowledged with the next output once the
// person pressed Done; elsewhere the step fails with BrainError 'safety_check'
// (halt class safety_check_pending). A final message without
// a computer_call is the model's own stop: DONE, judged by the step's checks.
import { childSignal } from '../../shared/abort.ts';
import { BrainError, type Action, type Brain, type Frame, type Inference, type ThinkOptions } from '../../gateway/plugins/contract.ts';
import type { BrainBackend } from '../../schemas/types.gen.ts';
import type { BrainEnv } from './chat-brain.ts';
import { describeAction } from './actions.ts';
import { REFUSAL_ADVICE, Conversations, NO_USAGE, addUsage, classify, displayFor, displayImage, keyOf, label, openingText, price, systemFor, toScreen, xdoKey, type Size } from './cua-common.ts';

type Json = Record<string, unknown>;
const MAX_ROUNDS = 6;

interface Queued {
  callId: string;
  action: Json;
  /** the call's last action: after it the call is answered */
  last: boolean;
}

interface Conv {
  task: string;
  returned: number;
  display: Size;
  screen: Size;
  previous?: string;
  /** input items of the next request */
  input: Json[];
  queue: Queued[];
  /** the call whose answer waits for the next frame */
  awaiting?: string;
  /** safety checks a person acknowledged (Done on the takeover), sent with the next computer_call_output */
  acknowledged?: SafetyCheck[];
}

export interface SafetyCheck {
  id: string;
  code?: string | null;
  message?: string | null;
}

type Mapped = { action: Action } | { answer: 'screenshot' };

/** One computer_call action as a plane action, or a screenshot answer (screenshot, move). */
export function mapOpenAiAction(a: Json, display: Size, screen: Size): Mapped {
  const bad = (why: string) => new BrainError('malformed', `malformed openai-computer answer: ${why}`);
  const pt = (x: unknown, y: unknown): { x: number; y: number } => {
    if (typeof x !== 'number' || typeof y !== 'number' || !Number.isFinite(x) || !Number.isFinite(y)) throw bad(`${String(a.type)} needs numeric x and y`);
    if (x < 0 || y < 0 || x >= display.width || y >= display.height) throw bad(`${String(a.type)} at (${x}, ${y}) is outside the ${display.width}x${display.height} display`);
    return toScreen({ x: Math.round(x), y: Math.round(y) }, display, screen);
  };
  switch (a.type) {
    case 'click': {
      const button = a.button ?? 'left';
      if (button === 'back') return { action: { type: 'KEY_PRESS', keys: 'alt+Left' } };
      if (button === 'forward') return { action: { type: 'KEY_PRESS', keys: 'alt+Right' } };
      return { action: { type: button === 'right' ? 'RIGHT_CLICK' : button === 'wheel' ? 'MIDDLE_CLICK' : 'CLICK', ...pt(a.x, a.y) } };
    }
    case 'double_click':
      return { action: { type: 'DOUBLE_CLICK', ...pt(a.x, a.y) } };
    case 'drag': {
      const path = Array.isArray(a.path) ? (a.path as Array<{ x?: unknown; y?: unknown }>) : [];
      if (path.length < 2) throw bad('drag needs a path of at least two points');
      const from = pt(path[0]!.x, path[0]!.y);
      const to = pt(path[path.length - 1]!.x, path[path.length - 1]!.y);
      return { action: { type: 'DRAG', x: from.x, y: from.y, to_x: to.x, to_y: to.y } };
    }
    case 'keypress': {
      const keys = Array.isArray(a.keys) ? a.keys.filter((k): k is string => typeof k === 'string' && k.trim() !== '') : [];
      if (keys.length === 0) throw bad('keypress needs keys');
      return { action: { type: 'KEY_PRESS', keys: keys.map(xdoKey).join('+') } };
    }
    case 'move':
      // the planes have no pointer move of its own: answered with the screen as it is
      pt(a.x, a.y);
      return { answer: 'screenshot' };
    case 'scroll': {
      const sx = typeof a.scroll_x === 'number' ? a.scroll_x : 0;
      const sy = typeof a.scroll_y === 'number' ? a.scroll_y : 0;
      // pixels -> wheel clicks (the planes scroll 100 px a click)
      const vertical = Math.abs(sy) >= Math.abs(sx);
      const d = vertical ? sy : sx;
      const direction = vertical ? (d < 0 ? 'up' : 'down') : d < 0 ? 'left' : 'right';
      const amount = Math.min(50, Math.max(1, Math.round(Math.abs(d) / 100)));
      return { action: { type: 'SCROLL', direction, amount, ...(typeof a.x === 'number' && typeof a.y === 'number' ? pt(a.x, a.y) : {}) } };
    }
    case 'type':
      if (typeof a.text !== 'string' || a.text === '') throw bad('type needs text');
      return { action: { type: 'TYPE', text: a.text } };
    case 'wait':
      return { action: { type: 'WAIT', seconds: 1 } };
    case 'screenshot':
      return { answer: 'screenshot' };
    default:
      throw bad(typeof a.type === 'string' ? `unknown action ${JSON.stringify(a.type.slice(0, 40))}` : 'a computer_call without an action');
  }
}

/** The actions of the model's computer_calls, in order; the last of a call is answered with the screen after it. */
function queued(calls: Json[]): Queued[] {
  return calls.flatMap((i) => {
    const list = Array.isArray(i.actions) && i.actions.length > 0 ? (i.actions as Json[]) : i.action ? [i.action as Json] : [{}];
    return list.map((action, n) => ({ callId: String(i.call_id), action, last: n === list.length - 1 }));
  });
}

export class OpenAiComputerBrain implements Brain {
  readonly description: string;
  private readonly conversations = new Conversations<Conv>();

  constructor(
    readonly id: string,
    private readonly backend: BrainBackend,
    private readonly env: BrainEnv,
  ) {
    this.description = `openai-computer backend ${backend.model} (computer_use_preview)`;
  }

  async think(frames: Frame[], task: string, history: Action[], screen: Size, signal?: AbortSignal, opts?: ThinkOptions): Promise<Inference> {
    const frame = frames[frames.length - 1];
    if (!frame) throw new BrainError('malformed', `${label(this.id, this.backend)} needs a screenshot`);
    let c = this.conversations.find(signal, task, history.length);
    if (c && c.awaiting) {
      c.input.push(await this.output(c.awaiting, frame, c.display, c));
      // the runner refused the action (a host off the tenant's list): said beside the screenshot
      if (frame.refused) c.input.push({ role: 'user', content: [{ type: 'input_text', text: `Last action refused: ${frame.refused}` }] });
      c.awaiting = undefined;
    } else if (!c) {
      const display = displayFor(screen, 'openai');
      const img = await displayImage(frame, display);
      c = {
        task,
        returned: history.length,
        display,
        screen: { ...screen },
        input: [{ role: 'user', content: [{ type: 'input_text', text: openingText(task, frame, history) }, { type: 'input_image', image_url: `data:${img.mediaType};base64,${img.data}`, detail: 'auto' }] }],
        queue: [],
      };
      this.conversations.keep(signal, c);
    }
    let usage = NO_USAGE;
    const said: string[] = [];
    for (let round = 0; ; round++) {
      while (c.queue.length > 0) {
        const q = c.queue.shift()!;
        let m: Mapped;
        try {
          m = mapOpenAiAction(q.action, c.display, c.screen);
        } catch (e) {
          this.conversations.drop(signal);
          throw e instanceof BrainError ? new BrainError(e.code, e.message, usage) : e;
        }
        if ('action' in m) {
          if (q.last) c.awaiting = q.callId;
          c.returned++;
          return { action: m.action, reasoning: said.join('\n').slice(0, 4000) || describeAction(m.action), usage };
        }
        // a screenshot is answered with this frame at once; later actions of the same call go on
        if (q.last) c.input.push(await this.output(q.callId, frame, c.display, c));
      }
      if (round >= MAX_ROUNDS) throw new BrainError('malformed', `malformed openai-computer answer: ${MAX_ROUNDS} calls in a row without an action the screen can carry out`, usage);
      const res = await this.call(c, signal, opts, usage);
      usage = addUsage(usage, price(this.backend, res.usage?.input_tokens, res.usage?.output_tokens));
      c.previous = res.id;
      c.input = [];
      const output = Array.isArray(res.output) ? res.output : [];
      for (const item of output) {
        if (item.type === 'message' && Array.isArray(item.content)) {
          for (const part of item.content as Json[]) {
            if (part.type === 'output_text' && typeof part.text === 'string' && part.text.trim()) said.push(part.text.trim());
            if (part.type === 'refusal') {
              this.conversations.drop(signal);
              return { action: { type: 'DONE', success: false }, reasoning: `refusal: ${label(this.id, this.backend)} declined the task; what to do: ${REFUSAL_ADVICE} (the model said: ${String(part.refusal ?? '').slice(0, 200)})`, usage };
            }
          }
        }
      }
      const calls = output.filter((i) => i.type === 'computer_call');
      const pending = calls.flatMap((i) => (Array.isArray(i.pending_safety_checks) ? (i.pending_safety_checks as SafetyCheck[]) : []));
      if (pending.length > 0) {
        // never acknowledged by the service: only a person (a takeover the run allows) may, by pressing Done
        const list = pending.map((p) => `${String(p.code ?? 'safety_check').slice(0, 60)}: ${String(p.message ?? '').slice(0, 300)}`).join('; ');
        if (opts?.mayAskHuman) {
          c.queue = queued(calls);
          c.acknowledged = pending.map((p) => ({ id: String(p.id), code: p.code ?? null, message: p.message ?? null }));
          c.returned++;
          return { action: { type: 'ASK_HUMAN', message: `The model asks a person to look at the page and acknowledge ${pending.length} safety check(s) before it goes on: ${list}. Press Done to acknowledge them, Fail to stop the run.` }, reasoning: said.join('\n').slice(0, 4000) || `pending safety checks: ${list}`, usage };
        }
        this.conversations.drop(signal);
        throw new BrainError('safety_check', `${label(this.id, this.backend)} asked for a person to acknowledge ${pending.length} pending safety check(s) (${list}); what to do: check the page the run reached, then run the step again with a plan that avoids it, or with runtime.brain_may_ask_human so a person can acknowledge it on the takeover page`, usage);
      }
      c.queue = queued(calls);
      if (c.queue.length === 0) {
        this.conversations.drop(signal);
        const incomplete = res.status === 'incomplete' ? String((res.incomplete_details as Json | undefined)?.reason ?? 'incomplete') : undefined;
        if (incomplete === 'content_filter') return { action: { type: 'DONE', success: false }, reasoning: `refusal: ${label(this.id, this.backend)} stopped on its content filter; what to do: ${REFUSAL_ADVICE}`, usage };
        if (incomplete) throw new BrainError('malformed', `malformed openai-computer answer: the response is incomplete (${incomplete.slice(0, 60)}); raise max_tokens of the backend`, usage);
        return { action: { type: 'DONE', success: true }, reasoning: said.join('\n').slice(0, 4000) || 'a final answer without computer_call', usage };
      }
    }
  }

  private async output(callId: string, frame: Frame, display: Size, c: Conv): Promise<Json> {
    const img = await displayImage(frame, display);
    const ack = c.acknowledged;
    c.acknowledged = undefined;
    return { type: 'computer_call_output', call_id: callId, ...(ack ? { acknowledged_safety_checks: ack } : {}), output: { type: 'computer_screenshot', image_url: `data:${img.mediaType};base64,${img.data}` } };
  }

  private async call(c: Conv, signal: AbortSignal | undefined, opts: ThinkOptions | undefined, spent: Inference['usage']): Promise<Json & { id: string; output?: Json[]; usage?: { input_tokens?: number; output_tokens?: number } }> {
    const key = await keyOf(this.id, this.backend, this.env, opts);
    const { default: OpenAI } = await import('openai');
    const maxRetries = this.backend.max_retries ?? 4;
    // organization/project null: the SDK would otherwise read OPENAI_ORG_ID/OPENAI_PROJECT_ID from the gateway's environment
    const client = new OpenAI({ apiKey: key, baseURL: this.backend.base_url.replace(/\/+$/, ''), organization: null, project: null, maxRetries, timeout: this.backend.timeout_ms ?? 60_000, logLevel: 'off' });
    // the SDK leaves a listener on the signal it is given for each call: it gets a child, let go of after the call
    const call = signal ? childSignal(signal) : undefined;
    try {
      const res = await client.responses.create(
        {
          model: this.backend.model,
          instructions: await systemFor(this.env, opts),
          tools: [{ type: 'computer_use_preview', display_width: c.display.width, display_height: c.display.height, environment: 'browser' }],
          input: c.input as never,
          truncation: 'auto',
          max_output_tokens: this.backend.max_tokens ?? 1024,
          store: true,
          ...(c.previous ? { previous_response_id: c.previous } : {}),
        },
        { signal: call?.signal },
      );
      return res as unknown as Json & { id: string; output?: Json[]; usage?: { input_tokens?: number; output_tokens?: number } };
    } catch (e) {
      throw classify(e, this.id, this.backend, maxRetries + 1, signal, spent);
    } finally {
      call?.dispose();
    }
  }
}
