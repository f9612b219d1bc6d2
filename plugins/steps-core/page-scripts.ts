// Expressions evaluated in the page on DOM-aware planes. Each is a complete
// expression built from JSON-encoded arguments, so plan text can never break
// out of its string.

const J = (v: unknown) => JSON.stringify(v);

/** Center of the first element matching a CSS selector, scrolled into view; null when none. */
export function locateSelector(selector: string): string {
  return `(() => {
    let el;
    try { el = document.querySelector(${J(selector)}); } catch (e) { return { error: 'invalid selector' }; }
    if (!el) return null;
    el.scrollIntoView({ block: 'center', inline: 'center' });
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) return null;
    return { x: Math.round(r.left + r.width / 2), y: Math.round(r.top + r.height / 2), tag: el.tagName.toLowerCase() };
  })()`;
}

/**
 * Center of the element whose accessible name or visible text matches one of
 * the labels (exact match first, then contains), preferring interactive
 * elements; for form fields, their <label>, aria-label, placeholder or name.
 * `role` (a compiled plan's target, issue 45): only elements of that role, explicit
 * or implicit, so "Search" never lands on a "Search terms" label.
 */
export function locateLabel(labels: string[], kind: 'clickable' | 'field' | 'select', role?: string): string {
  return `(() => {
    const wanted = ${J(labels)}.map((l) => l.trim().toLowerCase()).filter(Boolean);
    const kind = ${J(kind)};
    const role = ${J(role ?? null)};
    const implicit = { a: 'link', button: 'button', textarea: 'textbox', select: 'combobox', summary: 'button' };
    const roleOf = (el) => { const t = el.tagName.toLowerCase(); const ty = (el.getAttribute('type') || '').toLowerCase(); return el.getAttribute('role') || implicit[t] || (t === 'input' ? (['submit', 'button', 'reset', 'image'].includes(ty) ? 'button' : ty === 'checkbox' || ty === 'radio' ? ty : 'textbox') : ''); };
    const norm = (s) => (s || '').replace(/\\s+/g, ' ').trim().toLowerCase();
    const visible = (el) => { const r = el.getBoundingClientRect(); const st = getComputedStyle(el); return r.width > 0 && r.height > 0 && st.visibility !== 'hidden' && st.display !== 'none'; };
    const fieldNames = (el) => {
      const names = [el.getAttribute('aria-label'), el.getAttribute('placeholder'), el.getAttribute('name'), el.id, el.getAttribute('title')];
      if (el.labels) for (const l of el.labels) names.push(l.innerText);
      const by = el.getAttribute('aria-labelledby');
      if (by) for (const id of by.split(/\\s+/)) { const n = document.getElementById(id); if (n) names.push(n.innerText); }
      return names.map(norm).filter(Boolean);
    };
    const clickNames = (el) => [el.getAttribute('aria-label'), el.innerText, el.value, el.getAttribute('title'), el.getAttribute('alt')].map(norm).filter(Boolean);
    const selectors = {
      clickable: 'a, button, input[type=submit], input[type=button], input[type=reset], [role=button], [role=link], [role=tab], [role=menuitem], summary, label, [onclick]',
      field: 'input:not([type=hidden]):not([type=submit]):not([type=button]), textarea, [contenteditable=true], [role=textbox]',
      select: 'select, [role=combobox], [role=listbox]',
    };
    const els = Array.from(document.querySelectorAll(selectors[kind])).filter(visible).filter((el) => !role || roleOf(el) === role);
    const names = kind === 'clickable' ? clickNames : fieldNames;
    let hit = null;
    for (const pass of ['exact', 'contains']) {
      for (const w of wanted) {
        hit = els.find((el) => names(el).some((n) => pass === 'exact' ? n === w : n.includes(w)));
        if (hit) break;
      }
      if (hit) break;
    }
    if (!hit) return null;
    hit.scrollIntoView({ block: 'center', inline: 'center' });
    const r = hit.getBoundingClientRect();
    return { x: Math.round(r.left + r.width / 2), y: Math.round(r.top + r.height / 2), tag: hit.tagName.toLowerCase() };
  })()`;
}

/** Chooses an option of a <select> by its visible text (or value) and fires input/change. */
export function selectOption(dropdownLabels: string[], option: string): string {
  return `(() => {
    const wanted = ${J(dropdownLabels)}.map((l) => l.trim().toLowerCase());
    const opt = ${J(option)}.trim().toLowerCase();
    const norm = (s) => (s || '').replace(/\\s+/g, ' ').trim().toLowerCase();
    const names = (el) => { const n = [el.getAttribute('aria-label'), el.getAttribute('name'), el.id]; if (el.labels) for (const l of el.labels) n.push(l.innerText); return n.map(norm).filter(Boolean); };
    const sel = Array.from(document.querySelectorAll('select')).find((s) => names(s).some((n) => wanted.some((w) => n === w || n.includes(w))));
    if (!sel) return { ok: false, why: 'dropdown not found' };
    const o = Array.from(sel.options).find((x) => norm(x.text) === opt || norm(x.value) === opt) || Array.from(sel.options).find((x) => norm(x.text).includes(opt));
    if (!o) return { ok: false, why: 'option not found' };
    sel.value = o.value;
    sel.dispatchEvent(new Event('input', { bubbles: true }));
    sel.dispatchEvent(new Event('change', { bubbles: true }));
    return { ok: true, value: o.value };
  })()`;
}

export interface FieldSpec {
  name: string;
  selector?: string;
  attr?: string;
}

/**
 * Rows from each element matching itemSelector, fields read by relative
 * selectors (text, or an attribute). Cards matching an exclusion (a CSS
 * selector matching the card or an element in it; `text:` entries: the card's
 * text contains it, case-insensitive) are left out before reading; each row
 * carries its card's text in cardTextField for the runner's spam check.
 */
export function extractRows(itemSelector: string, fields: FieldSpec[], max: number, exclusions: string[] = [], cardTextField = '_card_text'): string {
  return `(() => {
    const fields = ${J(fields)};
    const exclusions = ${J(exclusions)};
    let items;
    try { items = Array.from(document.querySelectorAll(${J(itemSelector)})); } catch (e) { return { error: 'invalid item_selector' }; }
    const textOf = (el) => (el.innerText || el.textContent || '').replace(/\\s+/g, ' ').trim();
    const excluded = (item) => exclusions.some((x) => {
      if (x.startsWith('text:')) return textOf(item).toLowerCase().includes(x.slice(5).trim().toLowerCase());
      try { return item.matches(x) || item.querySelector(x) !== null; } catch (e) { return false; }
    });
    const kept = items.filter((item) => !excluded(item));
    const rows = [];
    for (const item of kept.slice(0, ${J(max)})) {
      const row = {};
      for (const f of fields) {
        let el = item;
        if (f.selector) { try { el = item.querySelector(f.selector); } catch (e) { el = null; } }
        if (!el) { row[f.name] = null; continue; }
        if (f.attr) {
          const v = f.attr === 'href' && el.href ? el.href : el.getAttribute(f.attr);
          row[f.name] = v === null ? null : String(v);
        } else row[f.name] = textOf(el);
      }
      row[${J(cardTextField)}] = textOf(item);
      rows.push(row);
    }
    return { rows, total: items.length, excluded: items.length - kept.length };
  })()`;
}

export const READ_LOCATION = `(() => ({ url: location.href, title: document.title }))()`;

/** Empties the focused text field and fires input, as select-all + delete would. */
export const CLEAR_FOCUSED = `(() => {
  const el = document.activeElement;
  if (!el) return false;
  if ('value' in el) { el.value = ''; } else if (el.isContentEditable) { el.textContent = ''; } else return false;
  el.dispatchEvent(new Event('input', { bubbles: true }));
  return true;
})()`;
