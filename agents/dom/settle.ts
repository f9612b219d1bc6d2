// After an input on dom_plane: wait for what the input set off, and only that,
// instead of a fixed sleep. The model is Playwright's auto-wait: a navigation
// the input requested (a link, a submit, a handler that set location) is waited
// to load; requests the page started during the input (a fetch, an XHR) are
// waited to finish; then one frame, so their handlers have run. An input that
// set off nothing costs one round trip and a frame. What the page can see is
// unchanged: the watching is DevTools events on the browser side.
import type { CDPSession, HTTPRequest, Page } from 'puppeteer-core';

/**
 * A task after the input's handlers and the zero-delay timers they set: a request
 * they started has been reported (its DevTools event precedes this answer on the
 * same session). It replaced a fixed 25 ms sleep (test/planes/dom-settle.test.ts).
 */
const AFTER_HANDLERS = 'new Promise((r) => setTimeout(r, 0))';
/**
 * A frame later, the responses' handlers have rendered. A hidden page (its popup took the
 * focus) paints no frames and never runs a requestAnimationFrame callback: waiting on one
 * there hung the click forever (issue 40), so a hidden page, or one hidden meanwhile, goes on at once.
 */
const NEXT_FRAME = `new Promise((r) => {
  if (document.hidden) return r();
  addEventListener('visibilitychange', () => r(), { once: true });
  requestAnimationFrame(() => setTimeout(r, 0));
})`;
/** Longest wait for the requests an input started (a long poll must not hold a step). */
const REQUESTS_MS = 3000;

export interface Settled {
  /** the input requested a main-frame navigation */
  navigated: boolean;
  /** everything it set off finished within the budget */
  settled: boolean;
}

const sessions = new WeakMap<Page, Promise<{ client: CDPSession; mainFrameId: string }>>();

/** A DevTools session of the page's own with Page events on (frameRequestedNavigation is not surfaced by puppeteer). */
export function pageEvents(page: Page): Promise<{ client: CDPSession; mainFrameId: string }> {
  let s = sessions.get(page);
  if (!s) {
    s = page.createCDPSession().then(async (client) => {
      await client.send('Page.enable');
      // the main frame keeps its id across navigations
      const { frameTree } = await client.send('Page.getFrameTree');
      return { client, mainFrameId: frameTree.frame.id };
    });
    sessions.set(page, s);
    s.catch(() => sessions.delete(page));
  }
  return s;
}

/** Wakes a waiter on the next DevTools event that may end its wait, or after `ms` at most. */
class Waker {
  private wake: (() => void) | undefined;
  poke = (): void => {
    this.wake?.();
  };
  next(ms: number): Promise<void> {
    return new Promise<void>((r) => {
      const t = setTimeout(r, Math.max(0, ms));
      this.wake = () => {
        clearTimeout(t);
        r();
      };
    });
  }
}

/** Longest wait between two checks of the document's load state (its load event wakes the check sooner). */
const LOAD_CHECK_MS = 50;

/** Runs `input` on `page` and waits for what it set off, within `budgetMs`. */
export async function afterInput(page: Page, input: () => Promise<void>, budgetMs: number): Promise<Settled> {
  const deadline = Date.now() + budgetMs;
  const { client, mainFrameId } = await pageEvents(page);
  const main = page.mainFrame();
  const waker = new Waker();
  let navRequested = false;
  let navDone = false;
  const inflight = new Set<HTTPRequest>();
  let watching = true;
  const onNavRequested = (e: { frameId: string }) => {
    if (e.frameId === mainFrameId) navRequested = true;
  };
  const onRequest = (r: HTTPRequest) => {
    if (!watching) return;
    if (r.isNavigationRequest() && r.frame() === main) navRequested = true;
    else inflight.add(r);
  };
  const onDone = (r: HTTPRequest) => {
    inflight.delete(r);
    if (r.isNavigationRequest() && r.frame() === main) navDone = true;
    waker.poke();
  };
  const onNavigated = (f: unknown) => {
    if (f === main) navDone = true;
    waker.poke();
  };
  client.on('Page.frameRequestedNavigation', onNavRequested);
  page.on('request', onRequest);
  page.on('requestfinished', onDone);
  page.on('requestfailed', onDone);
  page.on('framenavigated', onNavigated);
  page.on('load', waker.poke);
  try {
    await input();
    await page.evaluate(AFTER_HANDLERS).catch(() => undefined);
    watching = false;
    if (navRequested) {
      // the new document: committed (or the request ended without one: a 204, a download), then loaded
      while (!navDone && Date.now() < deadline) await waker.next(deadline - Date.now());
      while (Date.now() < deadline) {
        const state = await page.evaluate('document.readyState').catch(() => undefined);
        if (state === 'complete') return { navigated: true, settled: true };
        await waker.next(Math.min(LOAD_CHECK_MS, deadline - Date.now()));
      }
      return { navigated: true, settled: false };
    }
    const until = Math.min(deadline, Date.now() + REQUESTS_MS);
    while (inflight.size > 0 && Date.now() < until) await waker.next(until - Date.now());
    // the responses' handlers run in the page's next tasks; a frame later they have rendered
    await page.evaluate(NEXT_FRAME).catch(() => undefined);
    return { navigated: false, settled: inflight.size === 0 };
  } finally {
    client.off('Page.frameRequestedNavigation', onNavRequested);
    page.off('request', onRequest);
    page.off('requestfinished', onDone);
    page.off('requestfailed', onDone);
    page.off('framenavigated', onNavigated);
    page.off('load', waker.poke);
  }
}
