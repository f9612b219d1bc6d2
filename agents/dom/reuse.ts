// dom_plane's warm browser serves session after session, each in a fresh browser
// context: its own cookies, storage, HTTP cache, service workers, permissions and
// downloads folder, all dropped when the context closes at the session's end. The
// browser is retired after PLANE_BROWSER_SESSIONS sessions (or when it died) and a
// fresh one launched. A context costs tens of milliseconds where a browser's launch
// and close cost about a CPU second (decisions.md, "Where a run's CPU goes"). The next
// session's context, and on a browser's last session the browser that replaces it, are
// made while the session closes, beside its recording's finish: neither waits for that
// finish nor slows the session's own steps. Only the spare context's clipboard is
// emptied after the session.
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { BrowserContext, CDPSession, Page } from 'puppeteer-core';
import { abortable } from '../../shared/abort.ts';
import { closeLaunched, type Launched } from '../core/chromium.ts';

export interface WarmBrowser {
  launched: Launched;
  /** the next session's context, made ahead with its first tab */
  context: BrowserContext;
  /** sessions this browser served before this context's */
  served: number;
  /** where this context's downloads go (inside the browser's private home) */
  downloads: string;
  /** the DevTools session that set the downloads folder: Chromium forgets the setting when it detaches */
  cdp: CDPSession;
}

/** PLANE_BROWSER_SESSIONS: sessions one warm browser serves before it is replaced (1: a browser per session). */
export function browserSessions(env: NodeJS.ProcessEnv = process.env): number {
  const n = Number(env.PLANE_BROWSER_SESSIONS || 20);
  return Number.isInteger(n) && n >= 1 && n <= 1000 ? n : 20;
}

/**
 * A fresh context of `l` with its first tab and its own downloads folder. Its clipboard is
 * emptied when the browser served a session before, unless `emptyClipboard` is false: a
 * context made before a session's own is closed is emptied after that (renew).
 */
export async function freshContext(l: Launched, served: number, emptyClipboard = served > 0): Promise<WarmBrowser> {
  const context = await l.browser.createBrowserContext();
  const downloads = path.join(l.home, 'downloads', String(served));
  let cdp: CDPSession | undefined;
  try {
    cdp = await l.browser.target().createCDPSession();
    await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: downloads, browserContextId: context.id, eventsEnabled: false });
    const page = await context.newPage();
    // a browser that served a session has that session's clipboard (a new one's is empty);
    // a context whose clipboard could not be emptied is not lent (renew then retires its browser)
    if (emptyClipboard) await clearClipboard(page);
  } catch (err) {
    await cdp?.detach().catch(() => undefined);
    await context.close().catch(() => undefined);
    throw err;
  }
  return { launched: l, context, served, downloads, cdp };
}

/**
 * Empties the browser's clipboard from `page`, a fresh context's first tab (still at
 * about:blank, before any session has it). Headless Chromium keeps one clipboard for the
 * whole browser, across its contexts: what one session copied, a paste in the next
 * session (another tenant's) would type. A copy event replaces every format on the
 * clipboard with an empty text; the textarea and the listener are removed after.
 */
export async function clearClipboard(page: Page): Promise<void> {
  await page.evaluate(`(() => {
    const t = document.createElement('textarea');
    t.id = '__runplane_clip';
    t.value = '-';
    document.documentElement.append(t);
    document.addEventListener('copy', function once(e) {
      e.clipboardData.setData('text/plain', '');
      e.preventDefault();
      document.removeEventListener('copy', once, true);
      t.dataset.copied = '1';
    }, true);
    t.focus();
    t.select();
  })()`);
  await page.keyboard.down('Control');
  await page.keyboard.press('KeyC');
  await page.keyboard.up('Control');
  const copied = await page.evaluate(`(() => {
    const t = document.getElementById('__runplane_clip');
    const done = t?.dataset.copied === '1';
    t?.remove();
    return done;
  })()`);
  if (!copied) throw new Error('the clipboard could not be emptied');
}

/**
 * Whether the warm browser still answers. A browser SIGKILLed a moment ago still looks
 * connected until its end of the pipe is read, and a session started on it would fail
 * at its first step: one round trip (about a millisecond) tells.
 */
export async function answers(w: WarmBrowser): Promise<boolean> {
  if (!w.launched.browser.connected) return false;
  return abortable(w.launched.browser.version(), AbortSignal.timeout(2000)).then(
    () => w.launched.browser.connected,
    () => false,
  );
}

/**
 * After a session: its context closed, its downloads deleted, the egress guard back to
 * no policy and cut from the session's connections. Nothing of the session is left in
 * the browser once this settles; the session's close waits for it.
 */
export async function clearSession(w: WarmBrowser): Promise<void> {
  await w.context.close().catch(() => undefined);
  await w.cdp.detach().catch(() => undefined);
  await rm(w.downloads, { recursive: true, force: true });
  w.launched.egress.reset();
}

/**
 * The browser ready for the next session after `w`'s session was cleared (clearSession):
 * `spare`, made while the session closed, with the clipboard the session may have left
 * emptied now (a fresh context of the same browser), or the browser that replaces `w`'s
 * once it served `maxSessions` (or died); without a spare, a context made now. Undefined
 * when nothing is ready (the pool then makes a browser).
 */
export async function renew(w: WarmBrowser, maxSessions: number, spare?: Promise<WarmBrowser>): Promise<WarmBrowser | undefined> {
  const next = await spare?.catch(() => undefined);
  if (w.served + 1 >= maxSessions || !w.launched.browser.connected) {
    await closeLaunched(w.launched);
    if (next && next.launched === w.launched) return undefined;
    return next;
  }
  try {
    if (!next) return await freshContext(w.launched, w.served + 1);
    const [tab] = await next.context.pages();
    if (!tab) throw new Error('the spare context lost its tab');
    await clearClipboard(tab);
    return next;
  } catch (err) {
    await closeLaunched(w.launched);
    throw err;
  }
}

/**
 * What serves the session after `w`'s, made while `w`'s closes: a fresh context of the same
 * browser, or on the browser's last session the browser that replaces it (`replacement`).
 */
export function spareFor(w: WarmBrowser, maxSessions: number, replacement: () => Promise<WarmBrowser>): Promise<WarmBrowser> {
  const spare = w.served + 1 >= maxSessions ? replacement() : freshContext(w.launched, w.served + 1, false);
  // a spare that failed is made again at renewal (or by the pool)
  spare.catch(() => undefined);
  return spare;
}
