// Helpers on puppeteer pages shared by both planes.
import type { CDPSession, Page } from 'puppeteer-core';
import { badRequest, unprocessable } from './errors.ts';
import { optBool, str, type Body } from './validate.ts';
import { inPage, SCROLL_Y } from './inpage.ts';

export async function scrollY(page: Page | undefined): Promise<number> {
  if (!page) return 0;
  return inPage<number>(page, SCROLL_Y).catch(() => 0);
}

const layoutSessions = new WeakMap<Page, Promise<CDPSession>>();

/**
 * The page's vertical scroll read from its layout (Page.getLayoutMetrics on a
 * DevTools session), not from a script in the page: what computer_plane uses,
 * where nothing may run in the page.
 */
export async function layoutScrollY(page: Page | undefined): Promise<number> {
  if (!page) return 0;
  let session = layoutSessions.get(page);
  if (!session) {
    session = page.createCDPSession();
    layoutSessions.set(page, session);
  }
  try {
    const m = (await (await session).send('Page.getLayoutMetrics')) as { cssVisualViewport?: { pageY?: number } };
    return Math.round(m.cssVisualViewport?.pageY ?? 0);
  } catch {
    layoutSessions.delete(page);
    return 0;
  }
}

/** POST /cdp: a devtools Runtime.evaluate on the page; the reply is the spec's CDPResponse. */
export async function cdpEvaluate(page: Page | undefined, body: Body): Promise<{ result_json: string; returncode: number }> {
  if (!page) throw unprocessable('no open page to evaluate in');
  const expression = str(body, 'expression');
  if (expression.length > 100_000) throw badRequest('expression is over 100000 characters');
  const session = await page.createCDPSession();
  try {
    const r = (await session.send('Runtime.evaluate', {
      expression,
      awaitPromise: optBool(body, 'await_promise') ?? false,
      returnByValue: true,
      timeout: 10_000,
    })) as { result: { value?: unknown; description?: string }; exceptionDetails?: { text?: string; exception?: { description?: string } } };
    if (r.exceptionDetails) {
      return { result_json: JSON.stringify({ error: r.exceptionDetails.exception?.description ?? r.exceptionDetails.text ?? 'exception' }), returncode: 1 };
    }
    return { result_json: JSON.stringify(r.result.value ?? null), returncode: 0 };
  } finally {
    await session.detach().catch(() => undefined);
  }
}
