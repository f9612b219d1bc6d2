// forbidden_controls: a click, submit or brain pointer action whose target
// matches an entry is refused before the plane acts. An entry matches a
// target when it is a CSS selector the element (or an ancestor) matches, or
// when it is contained (case-insensitive, whitespace folded) in the element's
// label (aria-label, title, value, alt, name, id) or visible text, or in the
// step's params.label / aliases, or equals its params.selector. The element is
// the one under the point on DOM planes; without a DOM only the step's own
// label and selector can be judged. Refused: failure_class wrong_target, data
// starting "forbidden_control:", not retried.
import type { Action, StepContext, StepResult } from '../../gateway/plugins/contract.ts';
import { stepRules } from '../../shared/recipe-keys.ts';

const J = (v: unknown) => JSON.stringify(v);
const norm = (s: string) => s.replace(/\s+/g, ' ').trim().toLowerCase();

/** In the page: the first entry the interactive element under (x, y) matches, and its description; null when none. */
function matchAtPoint(x: number, y: number, entries: string[]): string {
  return `(() => {
    const entries = ${J(entries)};
    const norm = (s) => (s || '').replace(/\\s+/g, ' ').trim().toLowerCase();
    const hit = document.elementFromPoint(${J(x)}, ${J(y)});
    if (!hit) return null;
    const el = hit.closest('a, button, input, select, textarea, summary, label, [role=button], [role=link], [role=menuitem], [role=tab], [onclick]') || hit;
    const names = [el.getAttribute('aria-label'), el.getAttribute('title'), el.value, el.getAttribute('alt'), el.getAttribute('name'), el.id, el.innerText].map(norm).filter(Boolean);
    for (const e of entries) {
      let bySelector = false;
      try { bySelector = !!(hit.closest(e) || el.matches(e)); } catch (err) { bySelector = false; }
      const w = norm(e);
      if (bySelector || (w && names.some((n) => n.includes(w)))) return { entry: e, target: el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + ' ' + JSON.stringify((el.innerText || el.value || el.getAttribute('aria-label') || '').trim().slice(0, 80)) };
    }
    return null;
  })()`;
}

function refusal(entry: string, target: string, action: string): StepResult {
  return { success: false, failure_class: 'wrong_target', data: `forbidden_control: ${action} on ${target} refused before acting: it matches forbidden_controls entry ${J(entry)}`, retryable: false };
}

/** The step's own target (params.selector, params.label, aliases) against the entries, without looking at the page. */
function staticMatch(ctx: StepContext, entries: string[]): { entry: string; target: string } | undefined {
  const p = (ctx.step.params ?? {}) as Record<string, unknown>;
  const selector = typeof p.selector === 'string' ? p.selector : undefined;
  const labels = [p.label, ...(Array.isArray(p.aliases) ? p.aliases : [])].filter((x): x is string => typeof x === 'string' && x.length > 0);
  for (const e of entries) {
    if (selector && selector.trim() === e.trim()) return { entry: e, target: `selector ${J(selector)}` };
    const l = labels.find((x) => norm(x).includes(norm(e)));
    if (l && norm(e)) return { entry: e, target: `label ${J(l)}` };
  }
  return undefined;
}

/** A refusal when the action's target is a forbidden control, else undefined (act). */
export async function refuseForbidden(ctx: StepContext, action: Action, opts: { ownTarget?: boolean } = {}): Promise<StepResult | undefined> {
  const entries = stepRules(ctx.step).forbiddenControls;
  if (entries.length === 0) return undefined;
  if (opts.ownTarget) {
    const s = staticMatch(ctx, entries);
    if (s) return refusal(s.entry, s.target, action.type);
  }
  const pointer = action.type === 'CLICK' || action.type === 'DOUBLE_CLICK' || action.type === 'RIGHT_CLICK' || action.type === 'TRIPLE_CLICK' || action.type === 'MIDDLE_CLICK';
  if (!pointer || !ctx.plane.dom) return undefined;
  const hit = await ctx.plane.dom.evaluate<{ entry: string; target: string } | null>(matchAtPoint(action.x, action.y, entries));
  return hit ? refusal(hit.entry, hit.target, action.type) : undefined;
}
