// A page the plane's egress guard refused (a host outside the tenant's allowed_domains, or
// a private address): the step that led there fails, naming the host, instead of being
// judged as if the guard's 403 page were the site. A navigate learns it from the plane's
// nav_error and the page; a click, a key, a popup or a brain's action from the page it
// left: the guard's page on DOM planes, the active tab's page facts on computer_plane.
import type { Plane, StepResult } from '../../gateway/plugins/contract.ts';
import { hostAllowed } from '../../shared/allowed-domains.ts';

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

const OFF_LIST = "the host is outside the tenant's allowed_domains";

/** True when `url` is an http(s) URL whose host the list (non-empty) does not hold: the guard refuses every request to it. */
function offList(url: string, allowed: readonly string[]): boolean {
  if (allowed.length === 0 || !/^https?:/i.test(url)) return false;
  try {
    return !hostAllowed(new URL(url).hostname.replace(/^\[|\]$/g, ''), allowed);
  } catch {
    return false;
  }
}

/**
 * The refusal when the page an action left (the active tab: a popup it opened) is the egress
 * guard's, else undefined: the tab is at a host off the tenant's list (`allowed`), whatever
 * its page shows yet (a popup's response can come before its tab is tracked), or shows the
 * guard's page (a private address), or computer_plane's facts say the guard answered.
 */
export async function refusedPage(plane: Plane, halt = true, allowed: readonly string[] = []): Promise<StepResult | undefined> {
  if (plane.dom) {
    const url = allowed.length > 0 ? await plane.dom.currentUrl().catch(() => '') : '';
    if (offList(url, allowed)) return egressRefusal(url, OFF_LIST, halt);
    const p = await plane.dom.evaluate<{ url: string; said: string } | null>(GUARD_PAGE_PROBE).catch(() => null);
    return p ? egressRefusal(p.url, p.said.replace(/^Blocked by the egress guard\s*/, '').trim() || 'refused', halt) : undefined;
  }
  const f = await plane.facts?.().catch(() => null);
  if (f && offList(f.url, allowed)) return egressRefusal(f.url, OFF_LIST, halt);
  if (!f || (f.nav_error !== 'EGRESS_REFUSED' && f.title !== GUARD_TITLE)) return undefined;
  // the page's words (read only for a refused page: reading text costs the agent a page call) say why
  const said = (await plane.facts?.({ text: true }).catch(() => null))?.text?.replace(/^\s*Blocked by the egress guard\s*/, '').trim();
  return egressRefusal(f.url, said || "the host is outside the tenant's allowed_domains or a private address", halt);
}
