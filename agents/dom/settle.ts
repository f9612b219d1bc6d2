// After an input on dom_plane: wait for what the input set off, and only that,
// instead of a fixed sleep. The model is Playwright's auto-wait: a navigation
// the input requested (a link, a submit, a handler that set location) is waited
// to load; requests the page started during the input (a fetch, an XHR) are
// waited to finish; then one frame, so their handlers have run. An input that
// set off nothing costs one round trip and a frame. What the page can see is
// unchanged: the watching is DevTools events on the browser side.
import type { CDPSession, HTTPRequest, Page } from 'puppeteer-core';

/** Late request events: a request the input started may be reported just after the input returns. */
const LATE_EVENTS_MS = 25;
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
function pageEvents(page: Page): Promise<{ client: CDPSession; mainFrameId: string }> {
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

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Runs `input` on `page` and waits for what it set off, within `budgetMs`. */
export async function afterInput(page: Page, input: () => Promise<void>, budgetMs: number): Promise<Settled> {
  const deadline = Date.now() + budgetMs;
  const { client, mainFrameId } = await pageEvents(page);
  const main = page.mainFrame();
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
  };
  const onNavigated = (f: unknown) => {
    if (f === main) navDone = true;
  };
  client.on('Page.frameRequestedNavigation', onNavRequested);
  page.on('request', onRequest);
  page.on('requestfinished', onDone);
  page.on('requestfailed', onDone);
  page.on('framenavigated', onNavigated);
  try {
    await input();
    // what the input's handlers did has reached the page once a task after them has run
    await page.evaluate('0').catch(() => undefined);
    await sleep(LATE_EVENTS_MS);
    watching = false;
    if (navRequested) {
      // the new document: committed (or the request ended without one: a 204, a download), then loaded
      while (!navDone && Date.now() < deadline) await sleep(20);
      while (Date.now() < deadline) {
        const state = await page.evaluate('document.readyState').catch(() => undefined);
        if (state === 'complete') return { navigated: true, settled: true };
        await sleep(50);
      }
      return { navigated: true, settled: false };
    }
    const until = Math.min(deadline, Date.now() + REQUESTS_MS);
    while (inflight.size > 0 && Date.now() < until) await sleep(10);
    // the responses' handlers run in the page's next tasks; a frame later they have rendered
    await page.evaluate('new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)))').catch(() => undefined);
    return { navigated: false, settled: inflight.size === 0 };
  } finally {
    client.off('Page.frameRequestedNavigation', onNavRequested);
    page.off('request', onRequest);
    page.off('requestfinished', onDone);
    page.off('requestfailed', onDone);
    page.off('framenavigated', onNavigated);
  }
}
