// anthropic-computer: Claude's computer-use tool through the official SDK
// (@anthropic-ai/sdk, beta Messages API). One step is one conversation: the
// task and the screen, then each tool_use the model asks for is answered by a
// tool_result carrying the screenshot taken after the plane acted, across the
// brain loop's turns. Actions with no plane counterpart that need no input
// (screenshot, cursor_position, mouse_move, left_mouse_down) are answered at
// once without a turn; what the planes cannot do is answered with an is_error
// tool_result the model can read and work around. end_turn without tool_use
// is the model's own stop: DONE, judged by the step's checks.
import { childSignal } from '../../shared/abort.ts';
import { BrainError, type Action, type Answer, type Frame, type Inference, type ThinkOptions } from '../../gateway/plugins/contract.ts';
import type { BrainBackend } from '../../schemas/types.gen.ts';
import type { BrainEnv } from './chat-brain.ts';
import { describeAction } from './actions.ts';
import { REFUSAL_ADVICE, Conversations, NO_USAGE, addUsage, classify, displayFor, displayImage, keyOf, label, openingText, price, systemFor, toScreen, type Size } from './cua-common.ts';
import type { Brain } from '../../gateway/plugins/contract.ts';

/** Tool version -> the beta header the SDK documents for it. */
export const ANTHROPIC_TOOLS = { computer_20250124: 'computer-use-2025-01-24', computer_20251124: 'computer-use-2025-11-24' } as const;
export const DEFAULT_ANTHROPIC_TOOL = 'computer_20250124';
/** model calls one think() may make while every tool_use is answered without the plane (screenshots, errors) */
const MAX_ROUNDS = 6;

type Block = Record<string, unknown> & { type: string };
type Message = { role: 'user' | 'assistant'; content: Block[] };
type Reply = { content: Block[]; stop_reason?: string | null; usage?: { input_tokens?: number; output_tokens?: number } };

interface ToolUse {
  id: string;
  input: Record<string, unknown>;
}

interface Conv {
  task: string;
  returned: number;
  display: Size;
  screen: Size;
  messages: Message[];
  /** tool_uses of the last answer not yet answered, in order */
  queue: ToolUse[];
  /** answers gathered for the next user message */
  results: Block[];
  /** the tool_use the plane is carrying out; the next frame answers it */
  awaiting?: string;
  /** where the model's pointer is, in display pixels */
  cursor: { x: number; y: number };
  /** left_mouse_down's point, until left_mouse_up */
  down?: { x: number; y: number };
}

type Mapped = { action: Action } | { answer: 'screenshot' } | { answer: 'text'; text: string } | { error: string };

const err = (text: string): Mapped => ({ error: text });

/** One tool_use of the computer tool as a plane action or an answer of our own. */
export function mapComputerAction(input: Record<string, unknown>, c: Pick<Conv, 'display' | 'screen' | 'cursor' | 'down'>): Mapped {
  const action = typeof input.action === 'string' ? input.action : '';
  const at = (): { x: number; y: number } | string => {
    const v = input.coordinate;
    if (v === undefined || v === null) return { ...c.cursor };
    if (!Array.isArray(v) || v.length !== 2 || !v.every((n) => typeof n === 'number' && Number.isFinite(n))) return `${action} needs coordinate [x, y]`;
    const [x, y] = v as [number, number];
    if (x < 0 || y < 0 || x >= c.display.width || y >= c.display.height) return `coordinate (${x}, ${y}) is outside the ${c.display.width}x${c.display.height} display`;
    return { x: Math.round(x), y: Math.round(y) };
  };
  const click = (type: 'CLICK' | 'DOUBLE_CLICK' | 'RIGHT_CLICK' | 'TRIPLE_CLICK' | 'MIDDLE_CLICK'): Mapped => {
    // left_click's text holds modifier keys to hold during the click: the planes click without modifiers
    if (typeof input.text === 'string' && input.text !== '') return err(`${action} with held keys (${input.text.slice(0, 40)}) is not available on this screen; click without them`);
    const p = at();
    if (typeof p === 'string') return err(p);
    c.cursor = p;
    return { action: { type, ...toScreen(p, c.display, c.screen) } };
  };
  switch (action) {
    case 'screenshot':
      return { answer: 'screenshot' };
    case 'cursor_position':
      return { answer: 'text', text: `X=${c.cursor.x},Y=${c.cursor.y}` };
    case 'left_click':
      return click('CLICK');
    case 'double_click':
      return click('DOUBLE_CLICK');
    case 'right_click':
      return click('RIGHT_CLICK');
    case 'triple_click':
      return click('TRIPLE_CLICK');
    case 'middle_click':
      return click('MIDDLE_CLICK');
    case 'hold_key': {
      if (typeof input.text !== 'string' || input.text.trim() === '') return err('hold_key needs text (xdotool key names, e.g. shift)');
      const s = typeof input.duration === 'number' && input.duration >= 0 ? input.duration : NaN;
      if (!(s <= 10)) return err('hold_key needs a duration in seconds, at most 10');
      return { action: { type: 'HOLD_KEY', keys: input.text.trim(), seconds: s } };
    }
    case 'mouse_move': {
      // the planes have no pointer move of its own: the pointer goes there with the next click or drag
      const p = at();
      if (typeof p === 'string') return err(p);
      c.cursor = p;
      return { answer: 'screenshot' };
    }
    case 'left_click_drag': {
      const to = at();
      if (typeof to === 'string') return err(to);
      const sv = input.start_coordinate;
      const from = Array.isArray(sv) && sv.length === 2 && sv.every((n) => typeof n === 'number') ? { x: Math.round(sv[0] as number), y: Math.round(sv[1] as number) } : c.cursor;
      if (from.x < 0 || from.y < 0 || from.x >= c.display.width || from.y >= c.display.height) return err(`start_coordinate is outside the ${c.display.width}x${c.display.height} display`);
      c.cursor = to;
      const a = toScreen(from, c.display, c.screen);
      const b = toScreen(to, c.display, c.screen);
      return { action: { type: 'DRAG', x: a.x, y: a.y, to_x: b.x, to_y: b.y } };
    }
    case 'left_mouse_down':
      c.down = { ...c.cursor };
      return { answer: 'screenshot' };
    case 'left_mouse_up': {
      if (!c.down) return err('left_mouse_up without left_mouse_down');
      const from = c.down;
      c.down = undefined;
      const a = toScreen(from, c.display, c.screen);
      const b = toScreen(c.cursor, c.display, c.screen);
      // a press and release in one place is a click
      return { action: a.x === b.x && a.y === b.y ? { type: 'CLICK', ...a } : { type: 'DRAG', x: a.x, y: a.y, to_x: b.x, to_y: b.y } };
    }
    case 'scroll': {
      const direction = (['up', 'down', 'left', 'right'] as const).find((d) => d === input.scroll_direction);
      if (!direction) return err('scroll needs scroll_direction up, down, left or right');
      const amount = typeof input.scroll_amount === 'number' && input.scroll_amount > 0 ? Math.min(Math.round(input.scroll_amount), 50) : 3;
      const p = at();
      if (typeof p === 'string') return err(p);
      c.cursor = p;
      return { action: { type: 'SCROLL', direction, amount, ...toScreen(p, c.display, c.screen) } };
    }
    case 'type':
      if (typeof input.text !== 'string' || input.text === '') return err('type needs text');
      return { action: { type: 'TYPE', text: input.text } };
    case 'key':
      if (typeof input.text !== 'string' || input.text.trim() === '') return err('key needs text (xdotool key names, e.g. ctrl+a or Return)');
      return { action: { type: 'KEY_PRESS', keys: input.text.trim() } };
    case 'wait': {
      const s = typeof input.duration === 'number' && input.duration >= 0 ? Math.min(input.duration, 30) : 1;
      return { action: { type: 'WAIT', seconds: s } };
    }
    case 'zoom':
      return err(`${action} is not available on this screen; use left_click, double_click, key (e.g. ctrl+a) or left_click_drag instead`);
    default:
      return err(action ? `unknown action ${JSON.stringify(action.slice(0, 40))}` : 'the computer tool needs an action');
  }
}

export class AnthropicComputerBrain implements Brain {
  readonly description: string;
  private readonly conversations = new Conversations<Conv>();
  private readonly tool: keyof typeof ANTHROPIC_TOOLS;

  constructor(
    readonly id: string,
    private readonly backend: BrainBackend,
    private readonly env: BrainEnv,
  ) {
    this.tool = (backend.tool_version as keyof typeof ANTHROPIC_TOOLS | undefined) ?? DEFAULT_ANTHROPIC_TOOL;
    this.description = `anthropic-computer backend ${backend.model} (${this.tool})`;
  }

  async think(frames: Frame[], task: string, history: Action[], screen: Size, signal?: AbortSignal, opts?: ThinkOptions): Promise<Inference> {
    const frame = frames[frames.length - 1];
    if (!frame) throw new BrainError('malformed', `${label(this.id, this.backend)} needs a screenshot`);
    let c = this.conversations.find(signal, task, history.length);
    if (c && c.awaiting) {
      c.results.push(await this.result(c.awaiting, frame, c.display));
      c.awaiting = undefined;
    } else if (!c) {
      const display = displayFor(screen, 'anthropic');
      const img = await displayImage(frame, display);
      c = {
        task,
        returned: history.length,
        display,
        screen: { ...screen },
        messages: [{ role: 'user', content: [{ type: 'text', text: openingText(task, frame, history) }, { type: 'image', source: { type: 'base64', media_type: img.mediaType, data: img.data } }] }],
        queue: [],
        results: [],
        cursor: { x: Math.floor(display.width / 2), y: Math.floor(display.height / 2) },
      };
      this.conversations.keep(signal, c);
    }
    let usage = NO_USAGE;
    const said: string[] = [];
    for (let round = 0; ; round++) {
      while (c.queue.length > 0) {
        const use = c.queue.shift()!;
        const m = mapComputerAction(use.input, c);
        if ('action' in m) {
          c.awaiting = use.id;
          c.returned++;
          return { action: m.action, reasoning: said.join('\n').slice(0, 4000) || describeAction(m.action), usage };
        }
        c.results.push('error' in m ? { type: 'tool_result', tool_use_id: use.id, is_error: true, content: m.error } : m.answer === 'text' ? { type: 'tool_result', tool_use_id: use.id, content: m.text } : await this.result(use.id, frame, c.display));
      }
      if (round >= MAX_ROUNDS) throw new BrainError('malformed', `malformed anthropic-computer answer: ${MAX_ROUNDS} calls in a row without an action the screen can carry out`, usage);
      if (c.results.length > 0) {
        c.messages.push({ role: 'user', content: c.results });
        c.results = [];
      }
      const res = await this.call(c, signal, opts, usage);
      usage = addUsage(usage, price(this.backend, res.usage?.input_tokens, res.usage?.output_tokens));
      c.messages.push({ role: 'assistant', content: res.content });
      const text = res.content.filter((b) => b.type === 'text' && typeof b.text === 'string').map((b) => String(b.text).trim()).filter(Boolean);
      said.push(...text);
      if (res.stop_reason === 'refusal') {
        this.conversations.drop(signal);
        return { action: { type: 'DONE', success: false }, reasoning: `refusal: ${label(this.id, this.backend)} declined the task (stop_reason refusal); what to do: ${REFUSAL_ADVICE}${text.length ? ` (the model said: ${text.join(' ').slice(0, 200)})` : ''}`, usage };
      }
      if (res.stop_reason === 'model_context_window_exceeded') {
        throw new BrainError('budget_exceeded', `${label(this.id, this.backend)}: the step's conversation is longer than the model's context (stop_reason model_context_window_exceeded); what to do: split the step into shorter steps or lower its max_steps`, usage);
      }
      // pause_turn: the API paused a long turn; sending the conversation back lets it go on
      if (res.stop_reason === 'pause_turn') continue;
      c.queue = res.content.filter((b) => b.type === 'tool_use' && b.name === 'computer').map((b) => ({ id: String(b.id), input: (b.input ?? {}) as Record<string, unknown> }));
      const other = res.content.find((b) => b.type === 'tool_use' && b.name !== 'computer');
      if (other) throw new BrainError('malformed', `malformed anthropic-computer answer: tool_use of an unknown tool ${JSON.stringify(String(other.name).slice(0, 40))}`, usage);
      if (c.queue.length === 0) {
        this.conversations.drop(signal);
        if (res.stop_reason === 'max_tokens') throw new BrainError('malformed', `malformed anthropic-computer answer: cut at max_tokens (${this.backend.max_tokens ?? 1024}) before a tool_use; raise max_tokens of the backend`, usage);
        return { action: { type: 'DONE', success: true }, reasoning: said.join('\n').slice(0, 4000) || `${res.stop_reason ?? 'end_turn'} without tool_use`, usage };
      }
    }
  }

  private async result(toolUseId: string, frame: Frame, display: Size): Promise<Block> {
    const img = await displayImage(frame, display);
    const image = { type: 'image', source: { type: 'base64', media_type: img.mediaType, data: img.data } };
    // the runner refused the action (a host off the tenant's list): the model reads why beside the screen
    if (frame.refused) return { type: 'tool_result', tool_use_id: toolUseId, is_error: true, content: [{ type: 'text', text: frame.refused }, image] };
    return { type: 'tool_result', tool_use_id: toolUseId, content: [image] };
  }

  /** A text answer about the screen (model extraction, verify): one Messages call without the tool. */
  async ask(frames: Frame[], prompt: string, signal?: AbortSignal, opts?: ThinkOptions): Promise<Answer> {
    const frame = frames[frames.length - 1];
    const content: Block[] = [];
    if (frame) {
      const img = await displayImage(frame, displayFor({ width: frame.screenshot.width, height: frame.screenshot.height }, 'anthropic'));
      content.push({ type: 'image', source: { type: 'base64', media_type: img.mediaType, data: img.data } });
    }
    content.push({ type: 'text', text: prompt });
    const res = await this.request({ system: ASK_SYSTEM, messages: [{ role: 'user', content }] }, signal, opts, NO_USAGE);
    const usage = price(this.backend, res.usage?.input_tokens, res.usage?.output_tokens);
    const text = res.content.filter((b) => b.type === 'text' && typeof b.text === 'string').map((b) => String(b.text)).join('\n');
    if (res.stop_reason === 'refusal' || !text.trim()) throw new BrainError('malformed', `malformed anthropic-computer answer: ${res.stop_reason === 'refusal' ? 'the model refused the question' : 'no text'}`, usage);
    return { text, usage };
  }

  private async call(c: Conv, signal: AbortSignal | undefined, opts: ThinkOptions | undefined, spent: Inference['usage']): Promise<Reply> {
    return this.request(
      {
        system: await systemFor(this.env, opts),
        tools: [{ type: this.tool, name: 'computer', display_width_px: c.display.width, display_height_px: c.display.height }],
        betas: [ANTHROPIC_TOOLS[this.tool]],
        messages: c.messages,
      },
      signal,
      opts,
      spent,
    );
  }

  private async request(params: { system: string; messages: Message[]; tools?: Block[]; betas?: string[] }, signal: AbortSignal | undefined, opts: ThinkOptions | undefined, spent: Inference['usage']): Promise<Reply> {
    const key = await keyOf(this.id, this.backend, this.env, opts);
    const { default: Anthropic } = await import('@anthropic-ai/sdk');
    const maxRetries = this.backend.max_retries ?? 4;
    // logLevel off: the SDK's own log lines would carry request options; openTelemetry false: its spans (turned on by
    // environment variables) would record the conversation outside the run's trace. The key never leaves the client.
    const client = new Anthropic({ apiKey: key, authToken: null, baseURL: this.backend.base_url.replace(/\/+$/, ''), maxRetries, timeout: this.backend.timeout_ms ?? 60_000, logLevel: 'off', openTelemetry: false });
    // the SDK leaves a listener on the signal it is given for each call: it gets a child, let go of after the call
    const call = signal ? childSignal(signal) : undefined;
    try {
      const res = await client.beta.messages.create({ model: this.backend.model, max_tokens: this.backend.max_tokens ?? 1024, ...params } as never, { signal: call?.signal });
      return res as unknown as Reply;
    } catch (e) {
      throw classify(e, this.id, this.backend, maxRetries + 1, signal, spent);
    } finally {
      call?.dispose();
    }
  }
}

const ASK_SYSTEM = 'You read browser screenshots and answer questions about them exactly as asked.';
