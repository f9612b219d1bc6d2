// Anti-bot pages recognised from what a navigation left: the main document's
// status and headers, the page title, and (on planes with a DOM) a few page
// markers. One typed verdict for every vendor, so the runner can wait out a
// challenge and halt on a block with the same rules on both planes.

export type AntiBotKind = 'challenge' | 'captcha' | 'hard_block' | 'rate_limit' | 'access_denied';
export type AntiBotVendor = 'cloudflare' | 'perimeterx' | 'datadome' | 'imperva' | 'akamai' | 'unknown';

export interface AntiBotVerdict {
  vendor: AntiBotVendor;
  kind: AntiBotKind;
  /** what gave it away, for the step's data and the trace */
  evidence: string[];
}

/** What a navigation left, as much of it as the plane can see. */
export interface PageEvidence {
  status: number | null;
  /** lower-cased names */
  headers: Record<string, string>;
  title: string;
  /** DOM markers found on the page (DOM planes only): names from MARKERS */
  markers?: string[];
  /** a little of the visible text (DOM planes only) */
  text?: string;
}

/** Page markers a DOM plane looks for, by name: a CSS selector each. */
export const MARKERS: Record<string, string> = {
  cf_challenge_running: '#challenge-running, #challenge-form, #cf-challenge-running',
  cf_turnstile: '.cf-turnstile, iframe[src*="challenges.cloudflare.com"]',
  px_captcha: '#px-captcha',
  datadome_captcha: 'iframe[src*="captcha-delivery.com"], iframe[src*="geo.captcha-delivery.com"]',
  incapsula: 'iframe[src*="_Incapsula_Resource"], #incapsula-iframe',
};

/** A page script (no side effects): the markers present, the start of the visible text, the title and the document's status. */
export const MARKER_PROBE = `(() => {
  const m = ${JSON.stringify(MARKERS)};
  const found = Object.keys(m).filter((k) => { try { return !!document.querySelector(m[k]); } catch { return false; } });
  const nav = performance.getEntriesByType('navigation')[0];
  return { markers: found, text: document.body ? document.body.innerText.slice(0, 2000) : '', title: document.title, status: nav && nav.responseStatus ? nav.responseStatus : null, ready: document.readyState };
})()`;

const has = (e: PageEvidence, h: string) => e.headers[h] !== undefined;

/** The verdict for a page, or null when nothing says anti-bot. */
export function antiBotVerdict(e: PageEvidence): AntiBotVerdict | null {
  const markers = new Set(e.markers ?? []);
  const title = e.title.trim();
  const text = e.text ?? '';
  const server = (e.headers.server ?? '').toLowerCase();
  const cloudflare = server.includes('cloudflare') || has(e, 'cf-ray');
  const ev: string[] = [];
  const note = (s: string) => ev.push(s);
  if (e.status !== null) note(`status ${e.status}`);
  if (server) note(`server: ${server}`);
  if (has(e, 'cf-ray')) note('cf-ray header');

  // Cloudflare
  if (/sorry, you have been blocked/i.test(text) || (cloudflare && /^attention required/i.test(title) && e.status === 403)) {
    note(/sorry, you have been blocked/i.test(text) ? 'text "Sorry, you have been blocked"' : `title "${title}"`);
    return { vendor: 'cloudflare', kind: 'hard_block', evidence: ev };
  }
  const cfMitigated = (e.headers['cf-mitigated'] ?? '').toLowerCase();
  if (cfMitigated === 'challenge' || markers.has('cf_challenge_running') || markers.has('cf_turnstile') || (cloudflare && /^just a moment/i.test(title)) || /^just a moment\.\.\.$/i.test(title)) {
    if (cfMitigated) note(`cf-mitigated: ${cfMitigated}`);
    if (/^just a moment/i.test(title)) note(`title "${title}"`);
    for (const m of ['cf_challenge_running', 'cf_turnstile']) if (markers.has(m)) note(`marker ${m}`);
    return { vendor: 'cloudflare', kind: markers.has('cf_turnstile') && !markers.has('cf_challenge_running') ? 'captcha' : 'challenge', evidence: ev };
  }
  if (cloudflare && e.status === 429) return { vendor: 'cloudflare', kind: 'rate_limit', evidence: ev };
  // PerimeterX
  if (markers.has('px_captcha') || ((has(e, 'x-px') || /perimeterx|px-captcha/i.test(text)) && e.status === 403)) {
    note(markers.has('px_captcha') ? 'marker px_captcha' : 'PerimeterX signature');
    return { vendor: 'perimeterx', kind: 'captcha', evidence: ev };
  }
  // DataDome
  if (markers.has('datadome_captcha') || (has(e, 'x-datadome') && (e.status === 403 || e.status === 401))) {
    note(markers.has('datadome_captcha') ? 'marker datadome_captcha' : 'x-datadome header');
    return { vendor: 'datadome', kind: 'captcha', evidence: ev };
  }
  // Imperva / Incapsula
  if (markers.has('incapsula') || /incapsula incident id|request unsuccessful\. incapsula/i.test(text)) {
    note(markers.has('incapsula') ? 'marker incapsula' : 'Incapsula incident text');
    return { vendor: 'imperva', kind: 'access_denied', evidence: ev };
  }
  // Akamai's reference-number denial page
  if (/^access denied$/i.test(title) && (/reference #[0-9a-f.]+/i.test(text) || server.includes('akamaighost'))) {
    note(`title "${title}"`);
    return { vendor: 'akamai', kind: 'access_denied', evidence: ev };
  }
  if (e.status === 429) return { vendor: 'unknown', kind: 'rate_limit', evidence: ev };
  return null;
}

/** An interstitial challenge may clear on its own while the page is watched; a captcha, block or rate limit will not. */
export const waitsOut = (v: AntiBotVerdict): boolean => v.kind === 'challenge';

/** A block, denial or rate limit halts the run page_blocked; a challenge or captcha that stays halts cf_challenge. */
export const haltClassOfVerdict = (v: AntiBotVerdict): 'cf_challenge' | 'page_blocked' => (v.kind === 'challenge' || v.kind === 'captcha' ? 'cf_challenge' : 'page_blocked');
