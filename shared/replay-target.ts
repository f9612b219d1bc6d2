// What a recorded click or field resolves to on a DOM (issue 45): the element
// under the point, described by what survives a page's next build (role and
// accessible name, label, a stable id or test attribute, text; the point last),
// and the step params the mechanical locators (steps-core targeting) take for it.
// Shared by the brain loop (recording) and gateway/replay (a heal's new target).

export interface DurableTarget {
  tag: string;
  /** clickable, field (input, textarea, contenteditable) or select */
  kind: 'clickable' | 'field' | 'select';
  /** explicit role, else the tag's implicit one (button, link, textbox ...) */
  role?: string;
  /** accessible name: a clickable's aria-label or text; a field's label, aria-label, placeholder or name */
  name?: string;
  /** a CSS selector by a stable id or test attribute, when the element has one */
  selector?: string;
  /** an input of type password: text typed into it is never recorded */
  secret?: boolean;
  /** the point it was acted at (coordinates are the last resort) */
  x: number;
  y: number;
}

const J = (v: unknown) => JSON.stringify(v);

/** One evaluate: the nearest interactive element under (x, y), described; null when nothing is there. */
export function describeAtScript(x: number, y: number): string {
  return `(() => {
    const x = ${J(x)}, y = ${J(y)};
    let el = document.elementFromPoint(x, y);
    if (!el) return null;
    const interactive = 'a, button, input, textarea, select, summary, label, [role], [onclick], [contenteditable=true]';
    el = el.closest(interactive) || el;
    if (el.tagName === 'LABEL' && el.control) el = el.control;
    const norm = (s) => (s || '').replace(/\\s+/g, ' ').trim().slice(0, 200);
    const tag = el.tagName.toLowerCase();
    const type = (el.getAttribute('type') || '').toLowerCase();
    const field = (tag === 'input' && !['submit', 'button', 'reset', 'checkbox', 'radio', 'image'].includes(type)) || tag === 'textarea' || el.isContentEditable || el.getAttribute('role') === 'textbox';
    const kind = tag === 'select' ? 'select' : field ? 'field' : 'clickable';
    const implicit = { a: 'link', button: 'button', textarea: 'textbox', select: 'combobox', summary: 'button' };
    // as steps-core's locateLabel computes it, so a recorded role finds the element again
    const role = el.getAttribute('role') || implicit[tag] || (tag === 'input' ? (['submit', 'button', 'reset', 'image'].includes(type) ? 'button' : type === 'checkbox' || type === 'radio' ? type : 'textbox') : undefined);
    let name;
    if (kind === 'clickable') name = norm(el.getAttribute('aria-label') || el.innerText || el.value || el.getAttribute('title') || el.getAttribute('alt'));
    else {
      const byLabel = el.labels && el.labels.length ? el.labels[0].innerText : '';
      name = norm(byLabel || el.getAttribute('aria-label') || el.getAttribute('placeholder') || el.getAttribute('name'));
    }
    // ids that look generated (digits runs, hashes) change with the next build: not durable
    const stable = (v) => !!v && v.length <= 64 && !/\\d{3,}|[0-9a-f]{8,}/i.test(v);
    let selector;
    const testId = el.getAttribute('data-testid') || el.getAttribute('data-test');
    if (testId && stable(testId)) selector = '[data-testid=' + JSON.stringify(testId) + ']';
    else if (stable(el.id)) selector = '#' + CSS.escape(el.id);
    else if (kind !== 'clickable' && stable(el.getAttribute('name'))) selector = tag + '[name=' + JSON.stringify(el.getAttribute('name')) + ']';
    if (selector && document.querySelectorAll(selector).length !== 1) selector = undefined;
    const out = { tag, kind, x: Math.round(x), y: Math.round(y) };
    if (role) out.role = role;
    if (name) out.name = name;
    if (selector) out.selector = selector;
    if (tag === 'input' && type === 'password') out.secret = true;
    return out;
  })()`;
}

/** true when the focused element takes a password: what a brain types there is never recorded */
export const FOCUSED_IS_SECRET = `(() => { const e = document.activeElement; return !!e && e.tagName === 'INPUT' && (e.getAttribute('type') || '').toLowerCase() === 'password'; })()`;

/** A landmark of the page: its first heading, else its title (at most 200 characters). */
export const LANDMARK_SCRIPT = `(() => { const h = document.querySelector('h1, h2'); return ((h && h.innerText) || document.title || '').replace(/\\s+/g, ' ').trim().slice(0, 200); })()`;

/**
 * The step params a mechanical locator finds the target by: its accessible name
 * (params.label, with params.role for a clickable; the selector rides along in params.target for people),
 * else its stable selector, else the point.
 */
export function targetParams(t: DurableTarget | undefined, point: { x: number; y: number }): Record<string, unknown> {
  if (!t) return { x: point.x, y: point.y };
  const about = { target: { role: t.role, name: t.name, selector: t.selector, tag: t.tag, x: t.x, y: t.y } };
  // the role keeps a name from matching another kind of element that contains it (a label "Search terms" for "Search")
  if (t.name) return { label: t.name, ...(t.kind === 'clickable' && t.role ? { role: t.role } : {}), ...about };
  if (t.selector) return { selector: t.selector, ...about };
  return { x: t.x, y: t.y, ...about };
}
