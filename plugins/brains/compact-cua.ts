// compact-cua: the chat-completions wire format with one `computer_use`
// function tool. The screenshot is resized (sharp) to the model's input
// resolution (1428x896 unless the backend's input_wh, a constructor argument
// or SERVICE_COMPACT_INPUT_WH says otherwise) and coordinates are scaled back
// to the viewport. Its actions map to the service's as the spec's table says.
import { loadSharp } from '../../shared/load-once.ts';
import { BrainError, type Action, type Frame, type Inference, type ThinkOptions } from '../../gateway/plugins/contract.ts';
import type { BrainBackend } from '../../schemas/types.gen.ts';
import { ChatBrain, imagePart, type BrainEnv } from './chat-brain.ts';
import { describeAction } from './actions.ts';
import type { ChatResponse } from './upstream.ts';

export const DEFAULT_INPUT = { width: 1428, height: 896 };
export const SEARCH_URL = 'https://duckduckgo.com/?q=';

export const COMPACT_ACTIONS = ['left_click', 'type', 'key', 'scroll', 'wait', 'visit_url', 'history_back', 'web_search', 'mouse_move', 'pause_and_memorize_fact', 'terminate'] as const;

export const COMPUTER_USE_TOOL = {
  type: 'function',
  function: {
    name: 'computer_use',
    description: 'Use the browser: one action per call. Coordinates are pixels of the screenshot.',
    parameters: {
      type: 'object',
      properties: {
        action: { type: 'string', enum: COMPACT_ACTIONS },
        coordinate: { type: 'array', items: { type: 'number' }, minItems: 2, maxItems: 2 },
        text: { type: 'string' },
        keys: { type: 'array', items: { type: 'string' } },
        scroll_direction: { type: 'string', enum: ['up', 'down', 'left', 'right'] },
        scroll_amount: { type: 'number' },
        duration: { type: 'number' },
        url: { type: 'string' },
        query: { type: 'string' },
        fact: { type: 'string' },
        status: { type: 'string', enum: ['success', 'failure'] },
      },
      required: ['action'],
    },
  },
} as const;

/** Parses `WxH` (e.g. 1428x896); undefined when absent, an Error when malformed. */
export function parseWH(raw: string | undefined, name: string): { width: number; height: number } | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  const m = /^\s*([1-9]\d{1,4})x([1-9]\d{1,4})\s*$/i.exec(raw);
  if (!m) throw new Error(`${name} must be WxH (e.g. 1428x896), got ${JSON.stringify(raw)}`);
  return { width: Number(m[1]), height: Number(m[2]) };
}

const bad = (why: string) => new BrainError('malformed', `malformed compact-cua answer: ${why}`);

/** The spec's mapping table: one computer_use call to a service action, coordinates scaled from input to viewport. */
export function mapCompactAction(args: Record<string, unknown>, input: { width: number; height: number }, viewport: { width: number; height: number }): { action: Action; reasoning: string } {
  const scale = (c: unknown): { x: number; y: number } => {
    if (!Array.isArray(c) || c.length !== 2 || c.some((v) => typeof v !== 'number' || !Number.isFinite(v))) throw bad(`${String(args.action)} needs coordinate [x, y]`);
    const [x, y] = c as [number, number];
    if (x < 0 || y < 0 || x >= input.width || y >= input.height) throw bad(`coordinate (${x}, ${y}) is outside the ${input.width}x${input.height} input`);
    return { x: Math.min(viewport.width - 1, Math.round((x * viewport.width) / input.width)), y: Math.min(viewport.height - 1, Math.round((y * viewport.height) / input.height)) };
  };
  const str = (k: string): string => {
    const v = args[k];
    if (typeof v !== 'string' || v === '') throw bad(`${String(args.action)} needs ${k}`);
    return v;
  };
  const note = typeof args.reasoning === 'string' ? args.reasoning : '';
  switch (args.action) {
    case 'left_click':
      return { action: { type: 'CLICK', ...scale(args.coordinate) }, reasoning: note };
    case 'type':
      return { action: { type: 'TYPE', text: typeof args.text === 'string' ? args.text : str('text') }, reasoning: note };
    case 'key': {
      const keys = Array.isArray(args.keys) ? args.keys.map(String).filter(Boolean) : typeof args.keys === 'string' ? [args.keys] : [];
      if (keys.length === 0) throw bad('key needs keys');
      return { action: { type: 'KEY_PRESS', keys: keys.join('+') }, reasoning: note };
    }
    case 'scroll': {
      const direction = (['up', 'down', 'left', 'right'] as const).find((d) => d === args.scroll_direction);
      if (!direction) throw bad('scroll needs scroll_direction up, down, left or right');
      const amount = typeof args.scroll_amount === 'number' && args.scroll_amount > 0 ? args.scroll_amount : 3;
      return { action: { type: 'SCROLL', direction, amount, ...(args.coordinate !== undefined ? scale(args.coordinate) : {}) }, reasoning: note };
    }
    case 'wait': {
      const seconds = typeof args.duration === 'number' && args.duration >= 0 ? Math.min(args.duration, 30) : 1;
      return { action: { type: 'WAIT', seconds }, reasoning: note };
    }
    case 'visit_url':
      return { action: { type: 'TYPE', text: str('url') }, reasoning: note || 'visit_url' };
    case 'history_back':
      return { action: { type: 'KEY_PRESS', keys: 'alt+Left' }, reasoning: note };
    case 'web_search':
      return { action: { type: 'TYPE', text: SEARCH_URL + encodeURIComponent(str('query')) }, reasoning: note || 'web_search' };
    case 'mouse_move':
      return { action: { type: 'WAIT', seconds: 0.2 }, reasoning: note || 'mouse_move (no-op)' };
    case 'pause_and_memorize_fact':
      return { action: { type: 'WAIT', seconds: 0.2 }, reasoning: `memorized fact: ${str('fact')}` };
    case 'terminate':
      return { action: { type: 'DONE', success: args.status === 'success' }, reasoning: note || `terminate (${String(args.status ?? 'no status')})` };
    default:
      throw bad(typeof args.action === 'string' ? `unknown action ${JSON.stringify(args.action.slice(0, 40))}` : 'no action');
  }
}

export class CompactCuaBrain extends ChatBrain {
  readonly input: { width: number; height: number };

  constructor(id: string, backend: BrainBackend, env: BrainEnv, input?: { width: number; height: number }) {
    super(id, backend, env);
    this.input = input ?? parseWH(backend.input_wh, `brains.${id}.input_wh`) ?? DEFAULT_INPUT;
  }

  protected override async imageOf(frame: Frame): Promise<Record<string, unknown>> {
    // JPEG: a quarter of the bytes of a fast PNG at this size, and quicker to encode
    const jpeg = await (await loadSharp())(frame.screenshot.image).resize(this.input.width, this.input.height, { fit: 'fill' }).jpeg({ quality: 85 }).toBuffer();
    return imagePart(frame, jpeg, 'jpeg');
  }

  /** History in the model's own coordinates, so it sees one space. */
  private inputSpace(a: Action, screen: { width: number; height: number }): Action {
    if (!('x' in a) || a.x === undefined || a.y === undefined) return a;
    return { ...a, x: Math.round((a.x * this.input.width) / screen.width), y: Math.round((a.y * this.input.height) / screen.height) } as Action;
  }

  override async think(frames: Frame[], task: string, history: Action[], screen: { width: number; height: number }, signal?: AbortSignal, opts?: ThinkOptions): Promise<Inference> {
    const frame = frames[frames.length - 1];
    const past = history.length ? history.map((a, i) => `${i + 1}. ${describeAction(this.inputSpace(a, screen))}`).join('\n') : '(none)';
    const text = `Task: ${task}\nScreen: ${this.input.width}x${this.input.height}${frame?.url ? `\nURL: ${frame.url}` : ''}${frame?.refused ? `\nLast action refused: ${frame.refused}` : ''}\nActions so far:\n${past}`;
    const messages = [
      { role: 'system' as const, content: await this.system('You operate a web browser through the computer_use tool, one action per turn. Call terminate with status success when the task is done, failure when it cannot be done.', opts) },
      { role: 'user' as const, content: [{ type: 'text', text }, ...(frame ? [await this.imageOf(frame)] : [])] },
    ];
    const { res, usage } = await this.call(messages, { tools: [COMPUTER_USE_TOOL], tool_choice: 'auto' }, signal, opts);
    try {
      return { ...this.parseCompact(res, screen), usage };
    } catch (err) {
      if (err instanceof BrainError) throw new BrainError(err.code, err.message, usage);
      throw err;
    }
  }

  private parseCompact(res: ChatResponse, screen: { width: number; height: number }): { action: Action; reasoning: string } {
    const message = res.choices?.[0]?.message;
    const call = message?.tool_calls?.find((t) => t.function?.name === 'computer_use');
    if (!call) throw bad('no computer_use tool call');
    let args: unknown;
    try {
      args = JSON.parse(call.function?.arguments ?? '');
    } catch {
      throw bad('computer_use arguments are not JSON');
    }
    if (!args || typeof args !== 'object' || Array.isArray(args)) throw bad('computer_use arguments are not an object');
    const mapped = mapCompactAction(args as Record<string, unknown>, this.input, screen);
    const said = typeof message?.content === 'string' ? message.content.trim() : '';
    return { action: mapped.action, reasoning: [said, mapped.reasoning].filter(Boolean).join('\n') };
  }
}
