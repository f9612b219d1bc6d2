// Anti-bot interstitials after a navigation and after every action that can
// change the page (a click, a submit, a paginate, a brain's action), on both planes: the verdict
// (shared/antibot.ts) from what the plane can see (DOM markers, title and the
// document's status on DOM planes; status, headers and title from the page
// facts on computer_plane). A challenge is watched for up to
// SERVICE_CF_PREWARM_MAX_SECONDS; one that clears lets the step go on, one that
// stays halts the run cf_challenge; a block, denial or rate limit halts it
// page_blocked. The verdict goes in the step's data (and so the trace).
import { antiBotVerdict, haltClassOfVerdict, MARKER_PROBE, waitsOut, type AntiBotVerdict, type PageEvidence } from '../../shared/antibot.ts';
import { sleep } from '../../shared/abort.ts';
import type { Action, ActResult, Plane, StepContext, StepResult } from '../../gateway/plugins/contract.ts';
import { refusedPage } from './egress-refusal.ts';

/** SERVICE_CF_PREWARM_MAX_SECONDS (default 15), read when a challenge is met. */
const prewarmMaxMs = (): number => {
  const n = Number(process.env.SERVICE_CF_PREWARM_MAX_SECONDS ?? 15);
  return (Number.isFinite(n) && n >= 0 ? Math.min(n, 300) : 15) * 1000;
};

interface Probe {
  markers: string[];
  text: string;
  title: string;
  status: number | null;
  ready: string;
}

/** Reads of a page that is between documents (a challenge reloads itself every second or so) before the probe gives up. */
const PROBE_TRIES = 8;

/**
 * What the page says of itself. A challenge page reloads itself: a probe can land
 * while the old document is gone (the evaluate fails) or the new one is still
 * parsing (no title yet), and a page judged then looks like a plain 403. Such a
 * probe is taken again, 150 ms apart, so a challenge is not reported as http_4xx.
 */
async function domProbe(plane: Plane, signal: AbortSignal): Promise<Probe | null> {
  let p: Probe | null = null;
  for (let i = 0; i < PROBE_TRIES && !signal.aborted; i++) {
    p = await plane.dom!.evaluate<Probe>(MARKER_PROBE).catch(() => null);
    if (p && p.ready !== 'loading') return p;
    await sleep(150, signal);
  }
  return p;
}

async function evidence(plane: Plane, act: ActResult | undefined, signal: AbortSignal): Promise<PageEvidence | null> {
  if (plane.dom) {
    const p = await domProbe(plane, signal);
    if (!p) return null;
    return { status: p.status ?? act?.http_status ?? null, headers: {}, title: String(p.title ?? ''), markers: p.markers, text: p.text };
  }
  // the rendered text too: Imperva and "you have been blocked" pages say what they are in words
  const f = await plane.facts?.({ text: true }).catch(() => null);
  return f ? { status: f.status, headers: f.headers, title: f.title, ...(f.text ? { text: f.text.slice(0, 2000) } : {}) } : null;
}

export type AntiBotOutcome = { verdict: null } | { verdict: AntiBotVerdict; cleared_after_ms: number; status: number | null; by_person_ms?: number } | { verdict: AntiBotVerdict; failure: StepResult };

/**
 * Looks at the page a navigation left; waits out a challenge; says what the step must do.
 * With `ask` of a run whose on_challenge is ask_human, a challenge or captcha that stays
 * is a request for a person (issue 42): once they press Done the page is judged again.
 */
export async function checkAntiBot(plane: Plane, act: ActResult | undefined, signal: AbortSignal, maxWaitMs = prewarmMaxMs(), ask?: Pick<StepContext, 'askHuman' | 'onChallenge'>): Promise<AntiBotOutcome> {
  const first = await evidence(plane, act, signal);
  const verdict = first && antiBotVerdict(first);
  if (!verdict) return { verdict: null };
  const t0 = Date.now();
  if (waitsOut(verdict)) {
    while (Date.now() - t0 < maxWaitMs) {
      await sleep(500, signal);
      const now = await evidence(plane, undefined, signal);
      if (now && !antiBotVerdict(now)) return { verdict, cleared_after_ms: Date.now() - t0, status: now.status };
    }
  }
  const halt = haltClassOfVerdict(verdict);
  if (halt === 'cf_challenge' && ask?.onChallenge === 'ask_human' && ask.askHuman) {
    const asked = Date.now();
    await ask.askHuman({ reason: 'challenge', message: `An anti-bot ${verdict.kind} (${verdict.vendor}) stands in the way: clear it on the page, then press Done.` });
    const now = await evidence(plane, undefined, signal);
    if (now && !antiBotVerdict(now)) return { verdict, cleared_after_ms: Date.now() - t0, status: now.status, by_person_ms: Date.now() - asked };
    return { verdict, failure: { success: false, failure_class: 'cf_challenge', data: `anti-bot ${verdict.kind} by ${verdict.vendor} still there after a person pressed Done: ${JSON.stringify(verdict)}`, halt: { halt_class: halt, error: 'page_blocked' }, retryable: false } };
  }
  const waited = waitsOut(verdict) ? ` (still there after ${Math.round((Date.now() - t0) / 1000)} s)` : '';
  return {
    verdict,
    failure: {
      success: false,
      failure_class: halt === 'cf_challenge' ? 'cf_challenge' : 'http_4xx',
      data: `anti-bot ${verdict.kind} by ${verdict.vendor}${waited}: ${JSON.stringify(verdict)}`,
      halt: { halt_class: halt, error: 'page_blocked' },
      retryable: false,
    },
  };
}

/** What the step's data says of a challenge that cleared while it was watched. */
export function clearedNote(bot: { verdict: AntiBotVerdict; cleared_after_ms: number; by_person_ms?: number }): string {
  const how = bot.by_person_ms !== undefined ? ' by a person who took over' : '';
  return `anti-bot ${bot.verdict.kind} by ${bot.verdict.vendor} cleared${how} after ${Math.round(bot.cleared_after_ms / 100) / 10} s: ${JSON.stringify(bot.verdict)}`;
}

/** The actions after which the page may be another document (a brain's turn is judged after these). */
export const changesPage = (a: Action): boolean => a.type === 'CLICK' || a.type === 'DOUBLE_CLICK' || a.type === 'TRIPLE_CLICK' || a.type === 'MIDDLE_CLICK' || a.type === 'KEY_PRESS' || a.type === 'NAVIGATE';

/**
 * The verdicts on the page an action left (issue 40): an interstitial reached by a click,
 * a submit or a brain's action fails the step as it fails a navigate, instead of being
 * judged as the page. `r` is the action's own result: kept when the page is a plain one,
 * noted when a challenge cleared, replaced (its last_action kept) by the failure otherwise.
 */
export async function judgeAfterAction(ctx: StepContext, r: StepResult): Promise<StepResult> {
  if (!r.success) return r;
  // a page the egress guard refused is the guard's, not the site's: no verdict on it
  const refused = await refusedPage(ctx.plane, true, ctx.allowedDomains);
  if (refused) return { ...refused, ...(r.last_action ? { last_action: r.last_action } : {}) };
  const bot = await checkAntiBot(ctx.plane, undefined, ctx.signal, undefined, ctx);
  if ('failure' in bot) return { ...bot.failure, ...(r.last_action ? { last_action: r.last_action } : {}) };
  if ('cleared_after_ms' in bot) return { ...r, data: [r.data, clearedNote(bot)].filter(Boolean).join('; ') };
  return r;
}
