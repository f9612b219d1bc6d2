// The live screen's input messages: checked against schemas/live.schema.json (the
// schema of the message's own type, so a refusal names the field at fault), and
// summarised for the record. A summary names the keys that are not text (Enter,
// Tab, arrows, modifiers, the key of a chord) and gives a character typed or a paste
// only as its length: what a person types never leaves the relay.
import type { ValidateFunction } from 'ajv';
import { validator } from '../../schemas/index.ts';
import type { LiveClientMessage, LiveKey, LiveMouse, LivePaste, LiveWheel } from '../../schemas/types.gen.ts';
import type { InputSummary } from './live-target.ts';

const TYPES = { mouse: 'LiveMouse', wheel: 'LiveWheel', key: 'LiveKey', paste: 'LivePaste' } as const;
type Kind = keyof typeof TYPES;
const validators = new Map<Kind, ValidateFunction<LiveMouse | LiveWheel | LiveKey | LivePaste>>();

/** The message, or why it is refused (a detail safe to show the person's page). */
export function parseLiveMessage(data: string): { ok: true; msg: LiveClientMessage } | { ok: false; detail: string; seq?: number } {
  let raw: unknown;
  try {
    raw = JSON.parse(data);
  } catch {
    return { ok: false, detail: 'a message is one JSON object' };
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return { ok: false, detail: 'a message is one JSON object' };
  const o = raw as Record<string, unknown>;
  const seq = Number.isSafeInteger(o.seq) && (o.seq as number) >= 0 ? (o.seq as number) : undefined;
  const kind = typeof o.type === 'string' && Object.hasOwn(TYPES, o.type) ? (o.type as Kind) : undefined;
  if (!kind) return { ok: false, detail: 'type must be mouse, wheel, key or paste', ...(seq !== undefined ? { seq } : {}) };
  let v = validators.get(kind);
  if (!v) validators.set(kind, (v = validator(`live.schema.json#/$defs/${TYPES[kind]}`)));
  if (!v(raw)) {
    const e = v.errors?.[0];
    const where = e?.instancePath ? e.instancePath.slice(1) : kind;
    const extra = e?.keyword === 'additionalProperties' ? ` (${String((e.params as { additionalProperty?: string }).additionalProperty).slice(0, 40)})` : '';
    return { ok: false, detail: `${where}: ${e?.message ?? 'invalid'}${extra}`, ...(seq !== undefined ? { seq } : {}) };
  }
  return { ok: true, msg: raw as LiveClientMessage };
}

/** A key whose press types its character: one character, without Control, Alt or Meta. */
export function typesText(m: LiveKey): boolean {
  return [...m.key].length === 1 && !(m.modifiers ?? []).some((x) => x !== 'Shift');
}

const round = (n: number): number => Math.round(n * 10) / 10;

/** What the record keeps of an input. */
export function summarize(m: LiveClientMessage, at = new Date()): InputSummary {
  const when = at.toISOString();
  const mods = (m.type !== 'paste' && m.modifiers?.length ? { modifiers: [...m.modifiers] } : {});
  switch (m.type) {
    case 'mouse':
      return { kind: 'mouse', action: m.action, x: round(m.x), y: round(m.y), ...(m.action === 'move' ? {} : { button: m.button ?? 'left' }), ...mods, at: when };
    case 'wheel':
      return { kind: 'wheel', x: round(m.x), y: round(m.y), dx: round(m.dx), dy: round(m.dy), ...mods, at: when };
    case 'key':
      if (typesText(m)) return { kind: 'key', action: m.action, text_length: 1, ...mods, at: when };
      return { kind: 'key', action: m.action, key: m.key === ' ' ? 'Space' : m.key, ...mods, at: when };
    case 'paste':
      return { kind: 'paste', text_length: [...m.text].length, at: when };
  }
}
