// Code that runs inside the page. Kept as source text because the agents' TypeScript
// program has no DOM lib (it is Node code); each snippet is an expression evaluated
// with JSON arguments via `inPage`.
import type { Page } from 'puppeteer-core';

export const SCROLL_Y = `Math.round(window.scrollY)`;

export const FOCUSED = `(() => {
  const el = document.activeElement;
  if (!el || el === document.body || el === document.documentElement) return null;
  const isField = el instanceof HTMLInputElement || el instanceof HTMLTextAreaElement;
  const text = (isField ? el.value : (el.textContent || '')).trim().slice(0, 500);
  return {
    tag: el.tagName.toLowerCase(),
    role: el.getAttribute('role'),
    aria_label: el.getAttribute('aria-label'),
    text,
    href: el instanceof HTMLAnchorElement ? el.href : el.getAttribute('href'),
  };
})()`;

export const CLIPBOARD = `Promise.race([
  navigator.clipboard.readText(),
  new Promise((r) => setTimeout(() => r(''), 1000)),
]).catch(() => '')`;

export const PAGE_LOAD = `(() => {
  const entries = [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')];
  const last = entries.reduce((m, e) => Math.max(m, e.responseEnd), 0);
  return { ready_state: document.readyState, last_resource_ms: last > 0 ? Math.round(performance.timeOrigin + last) : null, url: location.href };
})()`;

/** args: {selector?: string, bbox?: [x1,y1,x2,y2]} -> {href,target,tag} | null */
export const PEEK = `((a) => {
  let el = null;
  if (a.selector) el = document.querySelector(a.selector);
  else if (a.bbox) el = document.elementFromPoint((a.bbox[0] + a.bbox[2]) / 2, (a.bbox[1] + a.bbox[3]) / 2);
  const link = el ? el.closest('a[href], area[href]') : null;
  if (!link) return null;
  return { href: link.href, target: link.getAttribute('target') || '', tag: link.tagName.toLowerCase() };
})`;

export async function inPage<T>(page: Page, expr: string, arg?: unknown): Promise<T> {
  const src = arg === undefined ? expr : `${expr}(${JSON.stringify(arg)})`;
  return (await page.evaluate(src)) as T;
}
