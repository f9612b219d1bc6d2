// The live screen's two agent ops, shared by both planes: `live/frame` answers the
// page's picture once it changed (a long poll: the gateway asks with the last frame
// it has and waits for the next), and `live/input` relays one input of a person's
// browser (mouse, wheel, key, paste) to the page, in the page's CSS pixels. The
// gateway has checked each input against schemas/live.schema.json; the agent checks
// again what it relies on, so a malformed call is a 400, never a browser error.
import { badRequest } from './errors.ts';
import type { OpResult, OpSpec } from './types.ts';
import type { Body } from './validate.ts';

export const LIVE_ROUTES = { 'live/frame': 'POST', 'live/input': 'POST' } as const;

export type Modifier = 'Alt' | 'Control' | 'Meta' | 'Shift';
export type Button = 'left' | 'middle' | 'right';

export type LiveInput =
  | { type: 'mouse'; action: 'move' | 'down' | 'up'; x: number; y: number; button: Button; clicks: number; modifiers: Modifier[] }
  | { type: 'wheel'; x: number; y: number; dx: number; dy: number; modifiers: Modifier[] }
  | { type: 'key'; action: 'down' | 'up'; key: string; code: string; key_code: number | undefined; modifiers: Modifier[] }
  | { type: 'paste'; text: string };

const MODIFIERS: ReadonlySet<string> = new Set(['Alt', 'Control', 'Meta', 'Shift']);
const MAX_COORD = 16384;
export const MAX_PASTE = 10_000;

const num = (b: Body, k: string, min: number, max: number): number => {
  const v = b[k];
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) throw badRequest(`${k} must be a number in [${min}, ${max}]`);
  return v;
};

function modifiers(b: Body): Modifier[] {
  const v = b.modifiers ?? [];
  if (!Array.isArray(v) || v.length > 4 || !v.every((m) => typeof m === 'string' && MODIFIERS.has(m))) throw badRequest('modifiers must be a list of Alt, Control, Meta, Shift');
  return [...new Set(v as Modifier[])];
}

/** The input of a `live/input` call, checked. */
export function parseLiveInput(raw: unknown): LiveInput {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw badRequest('input must be an object');
  const b = raw as Body;
  switch (b.type) {
    case 'mouse': {
      if (b.action !== 'move' && b.action !== 'down' && b.action !== 'up') throw badRequest('mouse action must be move, down or up');
      const button = b.button ?? 'left';
      if (button !== 'left' && button !== 'middle' && button !== 'right') throw badRequest('button must be left, middle or right');
      const clicks = b.clicks === undefined ? 1 : num(b, 'clicks', 1, 3);
      return { type: 'mouse', action: b.action, x: num(b, 'x', 0, MAX_COORD), y: num(b, 'y', 0, MAX_COORD), button, clicks: Math.round(clicks), modifiers: modifiers(b) };
    }
    case 'wheel':
      return { type: 'wheel', x: num(b, 'x', 0, MAX_COORD), y: num(b, 'y', 0, MAX_COORD), dx: num(b, 'dx', -10_000, 10_000), dy: num(b, 'dy', -10_000, 10_000), modifiers: modifiers(b) };
    case 'key': {
      if (b.action !== 'down' && b.action !== 'up') throw badRequest('key action must be down or up');
      if (typeof b.key !== 'string' || b.key.length === 0 || b.key.length > 32) throw badRequest('key must be 1-32 characters');
      const code = b.code ?? '';
      if (typeof code !== 'string' || !/^[A-Za-z0-9]{0,32}$/.test(code)) throw badRequest('code must be letters and digits');
      const keyCode = b.key_code === undefined ? undefined : num(b, 'key_code', 0, 255);
      return { type: 'key', action: b.action, key: b.key, code, key_code: keyCode, modifiers: modifiers(b) };
    }
    case 'paste':
      if (typeof b.text !== 'string' || b.text.length === 0 || b.text.length > MAX_PASTE) throw badRequest(`paste text must be 1-${MAX_PASTE} characters`);
      return { type: 'paste', text: b.text };
    default:
      throw badRequest('input type must be mouse, wheel, key or paste');
  }
}

/** One picture of the page: JPEG bytes and the page size they show (CSS pixels). */
export interface LiveFrame {
  seq: number;
  jpeg: Buffer;
  width: number;
  height: number;
}

/**
 * The latest frame of a screen and the callers waiting for a newer one. A frame is
 * published only when its picture differs from the last (the caller decides), so a
 * still page costs the long poll nothing but its wait.
 */
export class FrameBox {
  private latest: LiveFrame | undefined;
  private seq = 0;
  private readonly waiters = new Set<() => void>();

  publish(jpeg: Buffer, width: number, height: number): void {
    this.latest = { seq: ++this.seq, jpeg, width, height };
    for (const w of [...this.waiters]) w();
  }

  /** A frame newer than `after`, waiting up to `waitMs` for one; undefined when none came. */
  async next(after: number, waitMs: number): Promise<LiveFrame | undefined> {
    if (this.latest && this.latest.seq > after) return this.latest;
    // a caller whose seq is ahead of ours talked to an earlier screen (the tab changed): give it ours
    if (this.latest && after > this.seq) return this.latest;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, waitMs);
      this.waiters.add(done);
    });
    return this.latest && this.latest.seq > after ? this.latest : undefined;
  }
}

/** What a plane gives the live ops. */
export interface LiveScreen {
  /** a frame newer than `after` within `waitMs`, or undefined (unchanged) */
  frame(after: number, waitMs: number): Promise<LiveFrame | undefined>;
  input(i: LiveInput): Promise<void>;
}

export const MAX_FRAME_WAIT_MS = 5000;

export function liveOps(screen: LiveScreen, noteInput?: (i: LiveInput) => void): Record<keyof typeof LIVE_ROUTES, OpSpec> {
  return {
    'live/frame': {
      http: 'POST',
      idempotent: false,
      async run(body: Body): Promise<OpResult> {
        const after = body.after === undefined ? 0 : num(body, 'after', 0, Number.MAX_SAFE_INTEGER);
        const wait = body.wait_ms === undefined ? 1000 : num(body, 'wait_ms', 0, MAX_FRAME_WAIT_MS);
        const f = await screen.frame(after, wait);
        if (!f) return { body: { seq: after, unchanged: true } };
        return { body: { seq: f.seq, width: f.width, height: f.height, format: 'jpeg' }, blob: f.jpeg };
      },
    },
    'live/input': {
      http: 'POST',
      // not deduplicated: inputs are many and each is a new one (the gateway never retries them)
      idempotent: false,
      async run(body: Body): Promise<OpResult> {
        const i = parseLiveInput(body.input);
        await screen.input(i);
        noteInput?.(i);
        return { body: { ok: true } };
      },
    },
  };
}
