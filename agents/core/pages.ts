// Helpers on puppeteer pages shared by both planes.
import type { Browser, Page } from 'puppeteer-core';
import { badRequest, unprocessable } from './errors.ts';
import { optBool, str, type Body } from './validate.ts';
import { inPage, SCROLL_Y, VISIBILITY } from './inpage.ts';

/** The page the user sees: the visible one, else the most recently opened. */
export async function visiblePage(browser: Browser): Promise<Page | undefined> {
  const pages = await browser.pages();
  const states = await Promise.all(
    pages.map((p) => inPage<string>(p, VISIBILITY).catch(() => 'hidden')),
  );
  const i = states.lastIndexOf('visible');
  return i >= 0 ? pages[i] : pages[pages.length - 1];
}

export async function scrollY(page: Page | undefined): Promise<number> {
  if (!page) return 0;
  return inPage<number>(page, SCROLL_Y).catch(() => 0);
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
