/* global document, sessionStorage, Node */
// The viewer's small helpers: DOM building, the API with the tab's token, files as blobs.
export const TOKEN_KEY = 'runplane.token';

/** h('tag.class#id', {attr}, ...children): a DOM node; strings become text. */
export function h(spec, attrs = {}, ...children) {
  const [tag, ...classes] = spec.split('.');
  const [name, id] = tag.split('#');
  const el = document.createElement(name || 'div');
  if (id) el.id = id;
  if (classes.length) el.className = classes.join(' ');
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    // through the CSSOM: the page's CSP refuses inline style attributes
    else if (k === 'style') Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) if (c !== undefined && c !== null && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}

export const token = () => sessionStorage.getItem(TOKEN_KEY);

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

export async function api(path, init = {}) {
  const res = await fetch(path, { ...init, headers: { 'X-Service-Token': token() ?? '', ...(init.body ? { 'Content-Type': 'application/json' } : {}), ...(init.headers ?? {}) } });
  const body = res.status === 204 ? null : await res.json().catch(() => null);
  if (!res.ok) throw new ApiError(res.status, body?.detail ?? `HTTP ${res.status}`);
  return body;
}

export const fmtTime = (iso) => (iso ? new Date(iso).toLocaleString() : '');
export const duration = (r) => (r.created_at && r.ended_at ? `${((Date.parse(r.ended_at) - Date.parse(r.created_at)) / 1000).toFixed(1)} s` : '');
export const badge = (status) => h(`span.badge.${status}`, {}, status);
/** A file of the run as a blob, or null when the run has none (404). */
export async function blobOf(path) {
  const res = await fetch(path, { headers: { 'X-Service-Token': token() ?? '' } });
  if (res.status === 404) return null;
  if (!res.ok) throw new ApiError(res.status, `HTTP ${res.status} for ${path}`);
  return res.blob();
}

export function download(name, blob) {
  const a = h('a', { href: URL.createObjectURL(blob), download: name });
  document.body.append(a);
  a.click();
  a.remove();
}

let shownPage = 0;

/**
 * A new page is being shown: #main says so at once (the page before stays on
 * screen no longer), and a view of an earlier page that answers late draws
 * nothing. Answers this page's `current()`.
 */
export function newPage() {
  const mine = ++shownPage;
  document.getElementById('main').replaceChildren(h('p.muted.loading', { role: 'status' }, 'Loading…'));
  return () => mine === shownPage;
}
