// The service's action vocabulary as a model sees it (one `act` tool for
// openai-chat backends) and the check of what a model answers: a known action
// type with its parameters, coordinates on the screen. Anything else is a
// BrainError('malformed'), never a crash.
import { BrainError, isHttpUrl, type Action } from '../../gateway/plugins/contract.ts';

export const ACTION_TYPES = ['CLICK', 'DOUBLE_CLICK', 'RIGHT_CLICK', 'DRAG', 'TYPE', 'KEY_PRESS', 'SCROLL', 'NAVIGATE', 'WAIT', 'DONE', 'ASK_HUMAN'] as const;

/** The function tool an openai-chat brain is offered: one action per turn. */
export const ACT_TOOL = {
  type: 'function',
  function: {
    name: 'act',
    description: 'Perform one action on the browser screen. Coordinates are screen pixels from the top-left corner. Call DONE with success true when the task is complete, false when it cannot be done.',
    parameters: {
      type: 'object',
      properties: {
        action: { type: 'string', enum: ACTION_TYPES },
        x: { type: 'number' },
        y: { type: 'number' },
        to_x: { type: 'number' },
        to_y: { type: 'number' },
        text: { type: 'string', description: 'TYPE: the text' },
        keys: { type: 'string', description: 'KEY_PRESS: xdotool key names, combos joined with + (ctrl+a, Return)' },
        direction: { type: 'string', enum: ['up', 'down', 'left', 'right'] },
        amount: { type: 'number', description: 'SCROLL: wheel clicks' },
        url: { type: 'string' },
        seconds: { type: 'number' },
        success: { type: 'boolean' },
        message: { type: 'string', description: 'ASK_HUMAN: what a person should do on the page (only when the run allows it)' },
        reasoning: { type: 'string', description: 'why this action' },
      },
      required: ['action'],
    },
  },
} as const;

/** The act tool for one turn: ASK_HUMAN is offered only to a run that lets its brain ask for a person. */
export function actTool(mayAskHuman: boolean): typeof ACT_TOOL | Record<string, unknown> {
  if (mayAskHuman) return ACT_TOOL;
  const { message: _message, ...properties } = ACT_TOOL.function.parameters.properties;
  void _message;
  return {
    ...ACT_TOOL,
    function: { ...ACT_TOOL.function, parameters: { ...ACT_TOOL.function.parameters, properties: { ...properties, action: { type: 'string', enum: ACTION_TYPES.filter((t) => t !== 'ASK_HUMAN') } } } },
  };
}

const malformed = (why: string) => new BrainError('malformed', `malformed model answer: ${why}`);
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : undefined);

function point(a: Record<string, unknown>, screen: { width: number; height: number }, xk = 'x', yk = 'y'): { x: number; y: number } {
  const x = num(a[xk]);
  const y = num(a[yk]);
  if (x === undefined || y === undefined) throw malformed(`${String(a.action)} needs numeric ${xk} and ${yk}`);
  if (x < 0 || y < 0 || x >= screen.width || y >= screen.height) throw malformed(`${String(a.action)} at (${x}, ${y}) is outside the ${screen.width}x${screen.height} screen`);
  return { x: Math.round(x), y: Math.round(y) };
}

/** A model's action object (the act tool's arguments, or JSON in its text) as a service Action. */
export function toAction(a: Record<string, unknown>, screen: { width: number; height: number }): Action {
  const type = typeof a.action === 'string' ? a.action.toUpperCase() : typeof a.type === 'string' ? a.type.toUpperCase() : '';
  const text = (k: string) => {
    const v = a[k];
    if (typeof v !== 'string' || v === '') throw malformed(`${type} needs a non-empty ${k}`);
    return v;
  };
  switch (type) {
    case 'CLICK':
    case 'DOUBLE_CLICK':
    case 'RIGHT_CLICK':
      return { type, ...point({ ...a, action: type }, screen) };
    case 'DRAG': {
      const from = point({ ...a, action: type }, screen);
      const to = point({ ...a, action: type }, screen, 'to_x', 'to_y');
      return { type, ...from, to_x: to.x, to_y: to.y };
    }
    case 'TYPE':
      return { type, text: typeof a.text === 'string' ? a.text : text('text') };
    case 'KEY_PRESS':
      return { type, keys: Array.isArray(a.keys) ? a.keys.map(String).join('+') : text('keys') };
    case 'SCROLL': {
      const direction = (['up', 'down', 'left', 'right'] as const).find((d) => d === a.direction) ?? 'down';
      const amount = num(a.amount) ?? 3;
      const hasPoint = num(a.x) !== undefined && num(a.y) !== undefined;
      return { type, direction, amount, ...(hasPoint ? point({ ...a, action: type }, screen) : {}) };
    }
    case 'NAVIGATE': {
      const url = text('url');
      if (!isHttpUrl(url)) throw new BrainError('bad_url', `the model asked to open ${JSON.stringify(url.slice(0, 200))}, which is not an http(s) URL`);
      return { type, url };
    }
    case 'WAIT':
      return { type, seconds: Math.min(Math.max(num(a.seconds) ?? 1, 0), 30) };
    case 'DONE':
      return { type, success: a.success !== false && a.success !== 'false' };
    case 'ASK_HUMAN':
      return { type, message: text('message').slice(0, 2000) };
    default:
      throw malformed(type ? `unknown action ${JSON.stringify(type.slice(0, 40))}` : 'no action');
  }
}

/** The first JSON object in a text answer (bare, or in a ``` fence). */
export function jsonIn(text: string): Record<string, unknown> | undefined {
  const start = text.indexOf('{');
  if (start < 0) return undefined;
  for (let end = text.lastIndexOf('}'); end > start; end = text.lastIndexOf('}', end - 1)) {
    try {
      const v = JSON.parse(text.slice(start, end + 1)) as unknown;
      if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
    } catch {
      // a shorter span may parse
    }
  }
  return undefined;
}

/** One line of action history for a prompt. */
export function describeAction(a: Action): string {
  const { type, ...params } = a;
  return `${type} ${JSON.stringify(params)}`;
}
