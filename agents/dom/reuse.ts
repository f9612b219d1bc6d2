// dom_plane's warm browser serves session after session, each in a fresh browser
// context: its own cookies, storage, HTTP cache, service workers, permissions and
// downloads folder, all dropped when the context closes at the session's end. The
// browser is retired after PLANE_BROWSER_SESSIONS sessions (or when it died) and a
// fresh one launched. A context costs tens of milliseconds where a browser's launch
// and close cost about a CPU second (decisions.md, "Where a run's CPU goes").
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

/** A fresh context of `l` with its first tab and its own downloads folder. */
export async function freshContext(l: Launched, served: number): Promise<WarmBrowser> {
  const context = await l.browser.createBrowserContext();
  const downloads = path.join(l.home, 'downloads', String(served));
  let cdp: CDPSession | undefined;
  try {
    cdp = await l.browser.target().createCDPSession();
    await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: downloads, browserContextId: context.id, eventsEnabled: false });
    const page = await context.newPage();
    // a browser that served a session has that session's clipboard (a new one's is empty);
    // a context whose clipboard could not be emptied is not lent (renew then retires its browser)
    if (served > 0) await clearClipboard(page);
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
 * A cleared browser with the next session's context, or undefined once it is retired
 * (closed). This runs after the session's close has answered: the next session on this
 * agent waits for it (WarmPool.borrowSoon).
 */
export async function renew(w: WarmBrowser, maxSessions: number): Promise<WarmBrowser | undefined> {
  if (w.served + 1 >= maxSessions || !w.launched.browser.connected) {
    await closeLaunched(w.launched);
    return undefined;
  }
  try {
    return await freshContext(w.launched, w.served + 1);
  } catch (err) {
    await closeLaunched(w.launched);
    throw err;
  }
}
