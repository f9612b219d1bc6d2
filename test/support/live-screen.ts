// The viewer's live screen as the takeover tests drive it: wait for its first
// picture, then map a point of the run's page to where it is on the screen (the
// canvas is scaled to fit the viewer's window).
import type { Page } from 'puppeteer-core';

/** Waits for the live screen's first frame; resolves to a mapping from page points to viewer points. */
export async function liveScreen(tab: Page, timeoutMs = 60_000): Promise<(x: number, y: number) => [number, number]> {
  await tab.waitForFunction("Number(document.querySelector('#live-screen')?.dataset.frames ?? 0) > 0", { timeout: timeoutMs });
  return screenPointer(tab);
}

/** Where a point of the run's page is on the viewer's live screen, as the screen is laid out now. */
export async function screenPointer(tab: Page): Promise<(x: number, y: number) => [number, number]> {
  const box = (await (await tab.$('#live-screen'))!.boundingBox())!;
  const [w, h] = await tab.$eval('#live-screen', (c) => [(c as unknown as { width: number }).width, (c as unknown as { height: number }).height]);
  return (x, y) => [box.x + ((x + 0.5) * box.width) / w, box.y + ((y + 0.5) * box.height) / h];
}

/** The takeover site's sign-in as a plan: the steps up to the second factor, then `middle`, then the greeting read. */
export function signInPlan(siteUrl: string, login: { username: string; password: string }, middle: Record<string, unknown>): Array<Record<string, unknown>> {
  return [
    { intent: 'open the sign-in page', type: 'navigate', url: `${siteUrl}/login`, required: true },
    { intent: 'type the username', type: 'type_text', params: { selector: '#username', text: login.username }, required: true },
    { intent: 'type the password', type: 'fill_field', params: { selector: '#password', value: login.password }, required: true },
    { intent: 'sign in', type: 'click', params: { selector: '#go' }, hints: { expect_url_contains: '/code' }, required: true },
    middle,
    { intent: 'read the greeting', type: 'extract_data', extract: { schema_name: 'welcome', item_selector: 'body', fields: [{ name: 'hello', type: 'str', selector: '#hello', required: true }] }, required: true },
  ];
}
