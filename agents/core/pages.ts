// Helpers on puppeteer pages shared by both planes.
import type { CDPSession, Page } from 'puppeteer-core';
import { badRequest, unprocessable } from './errors.ts';
import { optBool, str, type Body } from './validate.ts';
import { inPage, SCROLL_Y } from './inpage.ts';

export async function scrollY(page: Page | undefined): Promise<number> {
  if (!page) return 0;
  return inPage<number>(page, SCROLL_Y).catch(() => 0);
}

const sessions = new WeakMap<Page, Promise<CDPSession>>();

/**
 * One DevTools session of our own per page, kept while it works: a session made and
 * detached per call cost two more round trips (1.3 against 0.4 ms an evaluate, p50).
 */
function pageSession(page: Page): Promise<CDPSession> {
  let s = sessions.get(page);
  if (!s) {
    s = page.createCDPSession();
    sessions.set(page, s);
    s.catch(() => sessions.delete(page));
  }
  return s;
}

/** `send` on the page's session; a session that went away (the page's target was swapped) is made again once. */
async function onPage<T>(page: Page, send: (s: CDPSession) => Promise<T>): Promise<T> {
  const kept = pageSession(page);
  const s = await kept;
  try {
    return await send(s);
  } catch (err) {
    if (!s.detached) throw err;
    if (sessions.get(page) === kept) sessions.delete(page);
    return send(await pageSession(page));
  }
}

/**
 * The page's vertical scroll read from its layout (Page.getLayoutMetrics on a
 * DevTools session), not from a script in the page: what computer_plane uses,
 * where nothing may run in the page.
 */
export async function layoutScrollY(page: Page | undefined): Promise<number> {
  if (!page) return 0;
  try {
    const m = (await onPage(page, (s) => s.send('Page.getLayoutMetrics'))) as { cssVisualViewport?: { pageY?: number } };
    return Math.round(m.cssVisualViewport?.pageY ?? 0);
  } catch {
    return 0;
  }
}

/** POST /cdp: a devtools Runtime.evaluate on the page; the reply is the spec's CDPResponse. */
export async function cdpEvaluate(page: Page | undefined, body: Body): Promise<{ result_json: string; returncode: number }> {
  if (!page) throw unprocessable('no open page to evaluate in');
  const expression = str(body, 'expression');
  if (expression.length > 100_000) throw badRequest('expression is over 100000 characters');
  const r = (await onPage(page, (s) =>
    s.send('Runtime.evaluate', {
      expression,
      awaitPromise: optBool(body, 'await_promise') ?? false,
      returnByValue: true,
      timeout: 10_000,
    }),
  )) as { result: { value?: unknown; description?: string }; exceptionDetails?: { text?: string; exception?: { description?: string } } };
  if (r.exceptionDetails) {
    return { result_json: JSON.stringify({ error: r.exceptionDetails.exception?.description ?? r.exceptionDetails.text ?? 'exception' }), returncode: 1 };
  }
  return { result_json: JSON.stringify(r.result.value ?? null), returncode: 0 };
}
