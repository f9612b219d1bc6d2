// The expressions the MCP tools evaluate in a dom_plane page (the plane's `cdp` op, as
// the runner's DOM steps do): an accessibility snapshot that numbers the elements a
// later click or type can name (e12), and the lookup of a target (ref, selector,
// label, role with name) to the point a real click lands on. Arguments are
// JSON-encoded into the expression, so tool input never becomes code. The refs live
// in the page under a registry symbol, not in its DOM: a snapshot changes nothing a
// site's own scripts see, and a new document forgets them.

const J = (v: unknown): string => JSON.stringify(v);

/** Role and accessible name in the page, shared by the snapshot and the lookup. */
const A11Y = `
  const KEY = Symbol.for('runplane.mcp.refs');
  const norm = (s) => String(s == null ? '' : s).replace(/\\s+/g, ' ').trim();
  const INPUT_ROLES = { button: 'button', submit: 'button', reset: 'button', image: 'button', checkbox: 'checkbox', radio: 'radio', range: 'slider', search: 'searchbox', email: 'textbox', tel: 'textbox', text: 'textbox', url: 'textbox', password: 'textbox', number: 'spinbutton' };
  const roleOf = (el) => {
    const explicit = norm(el.getAttribute('role')).split(' ')[0];
    if (explicit) return explicit;
    const tag = el.tagName.toLowerCase();
    switch (tag) {
      case 'a': return el.hasAttribute('href') ? 'link' : '';
      case 'button': return 'button';
      case 'input': { const t = (el.getAttribute('type') || 'text').toLowerCase(); return t === 'hidden' ? '' : (INPUT_ROLES[t] || 'textbox'); }
      case 'textarea': return 'textbox';
      case 'select': return el.multiple || el.size > 1 ? 'listbox' : 'combobox';
      case 'option': return 'option';
      case 'h1': case 'h2': case 'h3': case 'h4': case 'h5': case 'h6': return 'heading';
      case 'img': return norm(el.getAttribute('alt')) ? 'img' : '';
      case 'nav': return 'navigation';
      case 'main': return 'main';
      case 'form': return 'form';
      case 'ul': case 'ol': return 'list';
      case 'li': return 'listitem';
      case 'table': return 'table';
      case 'tr': return 'row';
      case 'td': return 'cell';
      case 'th': return 'columnheader';
      case 'summary': return 'button';
      case 'dialog': return 'dialog';
      case 'p': return 'paragraph';
      default: return el.isContentEditable && el === el.closest('[contenteditable]') ? 'textbox' : '';
    }
  };
  const INTERACTIVE = new Set(['link', 'button', 'textbox', 'searchbox', 'checkbox', 'radio', 'combobox', 'listbox', 'option', 'slider', 'spinbutton', 'switch', 'tab', 'menuitem', 'menuitemcheckbox', 'menuitemradio', 'treeitem']);
  const nameOf = (el, role) => {
    const aria = norm(el.getAttribute('aria-label'));
    if (aria) return aria;
    const by = el.getAttribute('aria-labelledby');
    if (by) { const t = by.split(/\\s+/).map((id) => document.getElementById(id)).filter(Boolean).map((n) => norm(n.innerText || n.textContent)).join(' '); if (t) return t; }
    if (el.labels && el.labels.length) { const t = Array.from(el.labels).map((l) => norm(l.innerText || l.textContent)).join(' '); if (t) return t; }
    const tag = el.tagName.toLowerCase();
    if (tag === 'img') return norm(el.getAttribute('alt'));
    if (tag === 'input' && ['button', 'submit', 'reset'].includes((el.getAttribute('type') || '').toLowerCase())) return norm(el.value || el.getAttribute('type'));
    if (['textbox', 'searchbox', 'combobox', 'listbox', 'spinbutton', 'slider'].includes(role)) return norm(el.getAttribute('placeholder') || el.getAttribute('title') || el.getAttribute('name'));
    const text = norm(el.innerText || el.textContent);
    return text || norm(el.getAttribute('title'));
  };
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) return false;
    const st = getComputedStyle(el);
    return st.visibility !== 'hidden' && st.display !== 'none' && el.getAttribute('aria-hidden') !== 'true';
  };
  const center = (el) => {
    el.scrollIntoView({ block: 'center', inline: 'center' });
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) return null;
    return { x: Math.round(r.left + r.width / 2), y: Math.round(r.top + r.height / 2), tag: el.tagName.toLowerCase() };
  };
`;

/**
 * The page as lines of `- role "name" [ref=eN]`, indented by nesting, with plain text
 * blocks as `- text: ...`; every interactive element gets a ref. At most `maxLines`
 * lines and `maxChars` characters (a huge page says it was cut).
 */
export function snapshotScript(maxLines: number, maxChars: number): string {
  return `(() => {
  ${A11Y}
  const refs = new Map();
  const lines = [];
  let chars = 0;
  let cut = false;
  const push = (depth, line) => {
    if (cut) return;
    const s = '  '.repeat(Math.min(depth, 20)) + '- ' + line;
    if (lines.length >= ${J(maxLines)} || chars + s.length > ${J(maxChars)}) { cut = true; return; }
    lines.push(s);
    chars += s.length + 1;
  };
  const quote = (s) => JSON.stringify(s.length > 200 ? s.slice(0, 200) + '...' : s);
  const walk = (el, depth) => {
    if (cut || !(el instanceof Element)) return;
    const tag = el.tagName.toLowerCase();
    if (['script', 'style', 'noscript', 'template', 'head', 'meta', 'link'].includes(tag)) return;
    if (!visible(el) && tag !== 'option') return;
    const role = roleOf(el);
    if (INTERACTIVE.has(role)) {
      const ref = 'e' + (refs.size + 1);
      refs.set(ref, new WeakRef(el));
      const name = nameOf(el, role);
      const attrs = [];
      if (role === 'checkbox' || role === 'radio') attrs.push(el.checked ? 'checked' : 'unchecked');
      if (el.disabled) attrs.push('disabled');
      if ((role === 'textbox' || role === 'searchbox' || role === 'spinbutton') && 'value' in el && el.value) attrs.push('value=' + quote(String(el.value)));
      if (role === 'combobox' && el.tagName === 'SELECT' && el.selectedOptions && el.selectedOptions[0]) attrs.push('selected=' + quote(norm(el.selectedOptions[0].text)));
      attrs.push('ref=' + ref);
      let line = role + (name ? ' ' + quote(name) : '') + ' [' + attrs.join('] [') + ']';
      if (role === 'link') { const href = el.getAttribute('href') || ''; if (href && !href.startsWith('javascript:')) line += ' -> ' + href.slice(0, 300); }
      push(depth, line);
      // a link's or button's own text is its name: its children add nothing a model needs
      if (role === 'link' || role === 'button' || tag === 'select' || tag === 'textarea') return;
      for (const c of el.children) walk(c, depth + 1);
      return;
    }
    if (role === 'heading') {
      push(depth, 'heading ' + quote(nameOf(el, role)) + ' [level=' + (Number(tag.slice(1)) || Number(el.getAttribute('aria-level')) || 2) + ']');
      return;
    }
    if (role === 'img') { push(depth, 'img ' + quote(nameOf(el, role))); return; }
    const structural = ['navigation', 'main', 'form', 'list', 'listitem', 'table', 'row', 'dialog'].includes(role);
    let inner = depth;
    if (structural) { push(depth, role + (el.getAttribute('aria-label') ? ' ' + quote(norm(el.getAttribute('aria-label'))) : '')); inner = depth + 1; }
    // text of this element that is not inside a child element
    let own = '';
    for (const n of el.childNodes) if (n.nodeType === Node.TEXT_NODE) own += n.textContent;
    own = norm(own);
    if (own) push(inner, 'text: ' + quote(own));
    for (const c of el.children) walk(c, inner);
  };
  if (document.body) walk(document.body, 0);
  window[KEY] = refs;
  return { url: location.href, title: document.title, refs: refs.size, cut, text: lines.join('\\n') };
})()`;
}

export interface TargetSpec {
  ref?: string;
  selector?: string;
  label?: string;
  role?: string;
  name?: string;
}

/** The point a click on the target lands on (scrolled into view), or {error} saying why there is none. */
export function locateScript(t: TargetSpec): string {
  return `(() => {
  ${A11Y}
  const t = ${J(t)};
  let el = null;
  if (t.ref) {
    const refs = window[KEY];
    const w = refs && refs.get(t.ref);
    el = w ? w.deref() : null;
    if (!el || !el.isConnected) return { error: 'ref ' + t.ref + ' is not on the page (the page changed or was never snapshotted): take a new snapshot' };
  } else if (t.selector) {
    try { el = document.querySelector(t.selector); } catch (e) { return { error: 'selector is not valid CSS' }; }
    if (!el) return { error: 'no element matches the selector' };
  } else {
    const wanted = norm(t.label || t.name).toLowerCase();
    const all = Array.from(document.querySelectorAll('body *')).filter((e) => visible(e));
    const candidates = t.role ? all.filter((e) => roleOf(e) === t.role) : all.filter((e) => INTERACTIVE.has(roleOf(e)));
    const names = (e) => t.role ? [nameOf(e, t.role)] : [nameOf(e, roleOf(e)), e.getAttribute('placeholder'), e.getAttribute('title')];
    for (const pass of ['exact', 'contains']) {
      el = candidates.find((e) => names(e).some((n) => { const v = norm(n).toLowerCase(); return v && (pass === 'exact' ? v === wanted : v.includes(wanted)); })) || null;
      if (el) break;
    }
    if (!el) return { error: t.role ? 'no ' + t.role + ' named ' + JSON.stringify(t.name) + ' on the page' : 'no element labelled ' + JSON.stringify(t.label) + ' on the page' };
  }
  const at = center(el);
  return at || { error: 'the element has no size on the page (hidden)' };
})()`;
}
