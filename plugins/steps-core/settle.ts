// How a step waits for the page after an action: until it reports load complete
// (DOM planes), until the browser's page facts say so (computer_plane), else a
// short settle. Its own module: the brain loop and the targeting both use it.
import type { Plane } from '../../gateway/plugins/contract.ts';
import { sleep } from '../../shared/abort.ts';

export const NAV_WAIT_MS = Number(process.env.SERVICE_NAV_WAIT_SECONDS ?? 30) * 1000;

/**
 * In the page: its readyState once it is complete, or when `ms` passed. Waits on the load
 * event rather than polling, so a page that loads 10 ms later is seen 10 ms later.
 */
const LOADED_WITHIN = (ms: number) =>
  `new Promise((r) => { if (document.readyState === 'complete') return r('complete'); const t = setTimeout(() => r(document.readyState), ${ms}); addEventListener('load', () => { clearTimeout(t); r(document.readyState); }, { once: true }); })`;

/**
 * Waits until the page reports load complete (DOM planes) or a short settle (others).
 * `committed`: the action already waited for its navigation to commit (a DOM plane's
 * navigate or history back), so there is no "navigation may start a moment later" to wait out.
 */
export async function settle(plane: Plane, signal: AbortSignal, budgetMs: number, committed = false): Promise<boolean> {
  if (!plane.dom && plane.facts) {
    // a navigation an action caused may start a moment after it
    const deadline = Date.now() + budgetMs;
    await sleep(300, signal);
    while (Date.now() < deadline) {
      const f = await plane.facts().catch(() => null);
      if (!f || f.load_state === 'complete' || f.nav_error) return true;
      await sleep(100, signal);
    }
    return false;
  }
  if (!plane.dom) {
    await sleep(Math.min(1500, budgetMs), signal);
    return true;
  }
  const deadline = Date.now() + budgetMs;
  // a navigation may start a moment after the action
  if (!committed) await sleep(150, signal);
  while (Date.now() < deadline) {
    // a second at most per look, so the run's signal is heard between looks
    const state = await plane.dom.evaluate<string>(LOADED_WITHIN(Math.max(1, Math.min(1000, deadline - Date.now())))).catch(() => undefined);
    if (state === 'complete') return true;
    // the document went away under the look (a redirect, a new navigation): look again shortly
    if (state === undefined) await sleep(100, signal);
    else if (signal.aborted) throw signal.reason;
  }
  return false;
}

