// Where a mechanical step acts and how it waits for the page: its target from
// params.x/params.y, params.selector (CSS), params.label with aliases, then
// target_role through the step's recipe, grounded by a brain on the screenshot
// when none finds a clickable target; the action; and the settle after it.
import type { ActResult, Action, Step, StepContext, StepResult } from '../../gateway/plugins/contract.ts';
import { ground } from './brain-loop.ts';
import { judgeAfterAction } from './antibot.ts';
import { locateLabel, locateSelector } from './page-scripts.ts';

export type Params = Record<string, unknown>;
export const params = (s: Step): Params => (s.params ?? {}) as Params;
export const str = (v: unknown): string | undefined => (typeof v === 'string' && v.length > 0 ? v : undefined);
export const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
export const labelsOf = (p: Params, key = 'label'): string[] => [str(p[key]), ...(Array.isArray(p.aliases) ? p.aliases.map(String) : [])].filter((x): x is string => !!x);

import { NAV_WAIT_MS, settle } from './settle.ts';

export { NAV_WAIT_MS, settle };

interface Point {
  x: number;
  y: number;
}

/** byRole: a target_role the role map could not resolve, which the vision grounder then tries */
type Located = { point: Point; how: string } | { miss: string; byRole?: boolean };

export async function locate(ctx: StepContext, kind: 'clickable' | 'field' | 'select', labelKey = 'label'): Promise<Located> {
  const p = params(ctx.step);
  const x = num(p.x);
  const y = num(p.y);
  if (x !== undefined && y !== undefined) return { point: { x, y }, how: 'coordinates' };
  const dom = ctx.plane.dom;
  if (!dom) return { miss: 'no DOM on this plane and no params.x/params.y; a brain must ground this target' };
  const selector = str(p.selector);
  if (selector) {
    const r = await dom.evaluate<(Point & { tag: string }) | { error: string } | null>(locateSelector(selector));
    if (r && 'error' in r) return { miss: `params.selector: ${r.error}` };
    if (r) return { point: r, how: `selector ${selector}` };
    return { miss: `no element matches selector ${selector}` };
  }
  const labels = labelsOf(p, labelKey);
  if (labels.length > 0) {
    const r = await dom.evaluate<(Point & { tag: string }) | null>(locateLabel(labels, kind, str(p.role)));
    if (r) return { point: r, how: `label ${JSON.stringify(labels[0])}` };
    return { miss: `no ${kind} element labelled ${labels.map((l) => JSON.stringify(l)).join(' or ')}` };
  }
  const role = str(ctx.step.target_role);
  if (role) {
    // the recipe's role map (its schema is the step's extract block)
    const roleSelector = str((ctx.step.extract?.target_roles as Record<string, unknown> | undefined)?.[role]);
    if (!roleSelector) return { miss: `target_role ${role} has no entry in the recipe's target_roles`, byRole: true };
    const r = await dom.evaluate<(Point & { tag: string }) | null>(locateSelector(roleSelector));
    if (r) return { point: r, how: `target_role ${role} (${roleSelector})` };
    return { miss: `target_role ${role} (${roleSelector}) matches nothing`, byRole: true };
  }
  return { miss: 'the step names no target (params.selector, params.label or target_role)' };
}

export const miss = (why: string): StepResult => ({ success: false, failure_class: 'selector_miss', data: why });

/** A clickable target: the mechanical locators, then grounding by a brain on the screenshot when that applies. */
export async function locateClickable(ctx: StepContext): Promise<Located> {
  const t = await locate(ctx, 'clickable');
  if (!('miss' in t)) return t;
  const g = await ground(ctx, t.byRole === true);
  if (!g) return t;
  return 'miss' in g ? { miss: `${t.miss}; ${g.miss}` } : g;
}

/** The JavaScript dialogs an action met, for the step's data: `confirm dialog "Delete?" dismissed`. */
export function dialogNote(done: ActResult): string | undefined {
  const ds = done.dialogs ?? [];
  return ds.length > 0 ? ds.map((d) => `${d.type} dialog ${JSON.stringify(d.message)} ${d.action === 'left' ? 'left to the CDP client' : d.action}`).join('; ') : undefined;
}

export async function act(ctx: StepContext, action: Action, reasoning: string): Promise<StepResult> {
  const done = await ctx.plane.act(action);
  const { type, ...rest } = action;
  const note = dialogNote(done);
  return { success: true, last_action: { type, params: rest, reasoning }, ...(note ? { data: note } : {}) };
}

/** An input that may set something off (a navigation, requests): waited out by the plane when it can, else here; then the anti-bot verdicts on the page it left. */
export async function actSettled(ctx: StepContext, action: Action, reasoning: string): Promise<StepResult> {
  const done = await ctx.plane.act(action);
  if (!done.settled) await settle(ctx.plane, ctx.signal, NAV_WAIT_MS);
  const { type, ...rest } = action;
  const note = dialogNote(done);
  return judgeAfterAction(ctx, { success: true, last_action: { type, params: rest, reasoning }, ...(note ? { data: note } : {}) });
}
