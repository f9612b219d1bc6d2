// The compiler (issue 45): what a brain did for a step, as mechanical steps of the
// plan language (click, type_text, key_press, scroll, navigate, wait ...), each
// marked `replay` with the state it expects and the brain intent it falls back to.
// A step is compiled only when every action it took has a mechanical form and no
// secret was typed; otherwise it stays a brain step (its replay asks the brain).
import { createHash } from 'node:crypto';
import { targetParams } from '../../shared/replay-target.ts';
import type { LearnedAction, LearnedStep, Step } from '../plugins/contract.ts';
import type { ReplayMark } from '../../schemas/types.gen.ts';
import type { VisualAnchor } from '../../shared/visual-anchor.ts';

export type { ReplayMark };

const INTENT_MAX = 4096;

const clip = (s: string, n: number): string => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** Where a URL is, for comparing pages: origin and path (a query may carry a session or a timestamp). */
export function pageOf(url: string | undefined): string | undefined {
  if (!url) return undefined;
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return undefined;
  }
}

/** A readable name of what a step acts on. */
function what(p: Record<string, unknown>): string {
  if (typeof p.label === 'string') return JSON.stringify(p.label);
  if (typeof p.selector === 'string') return p.selector;
  return `the point ${String(p.x)},${String(p.y)}`;
}

type Piece = { type: string; intent: string; params?: Record<string, unknown>; url?: string; seconds?: number; url_before?: string; anchor?: VisualAnchor };

/** One action (and the TYPE that follows a click into a field) as a mechanical step; undefined: it has none. */
function piece(a: LearnedAction, next: LearnedAction | undefined): { step: Piece; used: number } | undefined {
  const x = a.action;
  const before = a.url_before ? { url_before: a.url_before } : {};
  switch (x.type) {
    case 'CLICK':
    case 'DOUBLE_CLICK':
    case 'RIGHT_CLICK': {
      const params = targetParams(a.target, x);
      // a click into a field then typing: one type_text that finds the field itself
      if (x.type === 'CLICK' && a.target?.kind === 'field' && next?.action.type === 'TYPE' && !next.secret) {
        return { step: { type: 'type_text', intent: `Type ${JSON.stringify(next.action.text)} into ${what(params)}`, params: { ...params, text: next.action.text }, ...before }, used: 2 };
      }
      const type = x.type === 'CLICK' ? 'click' : x.type === 'DOUBLE_CLICK' ? 'double_click' : 'right_click';
      // computer_plane: bare coordinates, found again on the screen by their visual anchor
      const anchor = !a.target && a.anchor ? { anchor: a.anchor } : {};
      return { step: { type, intent: `${type.replace('_', ' ')} ${what(params)}`, params, ...before, ...anchor }, used: 1 };
    }
    case 'TYPE':
      return a.secret ? undefined : { step: { type: 'type_text', intent: `Type ${JSON.stringify(x.text)}`, params: { text: x.text }, ...before }, used: 1 };
    case 'KEY_PRESS':
      return { step: { type: 'key_press', intent: `Press ${x.keys}`, params: { keys: x.keys }, ...before }, used: 1 };
    case 'SCROLL':
      return { step: { type: 'scroll', intent: `Scroll ${x.direction} ${x.amount}`, params: { direction: x.direction, amount: x.amount, ...(x.x !== undefined && x.y !== undefined ? { x: x.x, y: x.y } : {}) }, ...before }, used: 1 };
    case 'NAVIGATE':
      return { step: { type: 'navigate', intent: `Open ${x.url}`, url: x.url, ...before }, used: 1 };
    case 'WAIT':
      return { step: { type: 'wait', intent: `Wait ${x.seconds} s`, seconds: x.seconds, ...before }, used: 1 };
    case 'DRAG':
      return { step: { type: 'drag', intent: 'Drag', params: { x: x.x, y: x.y, to_x: x.to_x, to_y: x.to_y }, ...before }, used: 1 };
    default:
      return undefined;
  }
}

/** A brain step's learned actions as mechanical steps, or why it cannot be compiled. */
export function compileStep(brainStep: Step, learned: LearnedStep, group: number, fromRun: string): Step[] | { refused: string } {
  if (learned.uncompilable) return { refused: learned.uncompilable };
  if (learned.actions.some((a) => a.secret)) return { refused: 'the brain typed into a password field; its text is never recorded' };
  const pieces: Piece[] = [];
  for (let i = 0; i < learned.actions.length; ) {
    const p = piece(learned.actions[i]!, learned.actions[i + 1]);
    if (!p) return { refused: `action ${learned.actions[i]!.action.type} has no mechanical form` };
    pieces.push(p.step);
    i += p.used;
  }
  const mark = (k: number): ReplayMark => {
    const after = k + 1 < pieces.length ? pieces[k + 1]!.url_before : learned.url_after;
    return {
      group,
      from_run: fromRun,
      intent: clip(brainStep.intent, INTENT_MAX),
      brain_type: brainStep.type,
      ...(brainStep.hint ? { hint: clip(brainStep.hint, INTENT_MAX) } : {}),
      ...(brainStep.verify ? { verify: clip(brainStep.verify, INTENT_MAX) } : {}),
      ...(brainStep.max_steps ? { max_steps: brainStep.max_steps } : {}),
      ...(pieces[k]!.url_before ? { url_before: pieces[k]!.url_before } : {}),
      ...(pieces[k]!.anchor ? { anchor: pieces[k]!.anchor } : {}),
      ...(after ? { url_after: after } : {}),
      // the landmark is what the brain saw when it said DONE: the group's last step checks it
      ...(k === pieces.length - 1 && learned.landmark ? { landmark: learned.landmark.slice(0, 512) } : {}),
    };
  };
  return pieces.map(({ url_before: _b, anchor: _a, ...s }, k) => ({ ...s, intent: clip(`${s.intent} (replay of: ${brainStep.intent})`, INTENT_MAX), replay: mark(k) }));
}

export interface Compiled {
  steps: Step[];
  /** brain steps replaced by mechanical ones */
  compiled: number;
  /** brain steps kept as they were, and why */
  kept: string[];
}

/** A run's top-level plan with each brain step that succeeded (learned, by top-level index) replaced by its mechanical steps. */
export function compilePlan(steps: Step[], learned: ReadonlyMap<number, LearnedStep>, fromRun: string): Compiled {
  const kept: string[] = [];
  let compiled = 0;
  const out = steps.flatMap((step, i) => {
    const l = learned.get(i);
    if (!l) return [step];
    const c = compileStep(step, l, i, fromRun);
    if ('refused' in c) {
      kept.push(`steps[${i}]: ${c.refused}`);
      return [step];
    }
    compiled++;
    return c;
  });
  return { steps: out, compiled, kept };
}

/** Stable JSON: keys sorted, so the same plan hashes the same whatever its key order. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** The plan's start URL: its first top-level navigate step's, if any. */
export function startUrlOf(steps: Step[]): string | null {
  return steps.find((s) => s.type === 'navigate' && typeof s.url === 'string')?.url ?? null;
}

/** The cache key of a submitted plan: tenant, the plan's hash and its start URL (docs/decisions.md). */
export function cacheKey(tenantId: string, steps: Step[]): string {
  const planHash = createHash('sha256').update(canonical(steps)).digest('hex');
  return createHash('sha256').update(`${tenantId}\n${planHash}\n${startUrlOf(steps) ?? ''}`).digest('hex').slice(0, 40);
}
