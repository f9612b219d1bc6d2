// A page the plane's egress guard refused (a host outside the tenant's allowed_domains, or
// a private address): the step that led there fails, naming the host, instead of being
// judged as if the guard's 403 page were the site. A navigate learns it from the plane's
// nav_error and the page; a click, a key, a popup or a brain's action from the page it
// left: the guard's page on DOM planes, the active tab's page facts on computer_plane.
import type { Plane, StepResult } from '../../gateway/plugins/contract.ts';

/** The title of the guard's own page (agents/core/egress-proxy.ts blockedPage). */
const GUARD_TITLE = 'Blocked by the egress guard';

/** What the guard's own page says of itself. */
const GUARD_PAGE_PROBE = `(() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const guard = document.title === ${JSON.stringify(GUARD_TITLE)} && (!nav || !nav.responseStatus || nav.responseStatus === 403);
  return guard ? { url: location.href, said: document.body ? document.body.innerText.slice(0, 300) : '' } : null;
})()`;

function hostOf(url: string): string {
  try {
    return new URL(url).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return url.slice(0, 200);
  }
}

/**
 * The failed step for a refused navigation to `url`. Its data starts with `egress_refused:`
 * (the run's failure_help names the host from it); never retried: the guard refuses it again.
 * `halt`: an action that left the plan's page for the guard's halts the run navigate_failed
 * (as an interstitial halts it); a navigate step halts it only when required, as before.
 */
export function egressRefusal(url: string, why: string, halt = true): StepResult {
  return {
    success: false,
    failure_class: 'http_4xx',
    data: `egress_refused: the egress guard refused ${hostOf(url)} (${url.slice(0, 300)}): ${why.slice(0, 300)}`,
    ...(halt ? { halt: { halt_class: 'navigate_failed' } } : {}),
    retryable: false,
  };
}

/**
 * The refusal when the page an action left (the active tab: a popup it opened) is the egress
 * guard's, else undefined. computer_plane knows it from its page facts: the guard's answer
 * (nav_error EGRESS_REFUSED) or, for a tab opened before its facts were tracked, the page's title.
 */
export async function refusedPage(plane: Plane, halt = true): Promise<StepResult | undefined> {
  if (plane.dom) {
    const p = await plane.dom.evaluate<{ url: string; said: string } | null>(GUARD_PAGE_PROBE).catch(() => null);
    return p ? egressRefusal(p.url, p.said.replace(/^Blocked by the egress guard\s*/, '').trim() || 'refused', halt) : undefined;
  }
  const f = await plane.facts?.().catch(() => null);
  if (!f || (f.nav_error !== 'EGRESS_REFUSED' && f.title !== GUARD_TITLE)) return undefined;
  // the page's words (read only for a refused page: reading text costs the agent a page call) say why
  const said = (await plane.facts?.({ text: true }).catch(() => null))?.text?.replace(/^\s*Blocked by the egress guard\s*/, '').trim();
  return egressRefusal(f.url, said || "the host is outside the tenant's allowed_domains or a private address", halt);
}
