// Page facts on computer_plane, learned from the browser's DevTools events and
// never from the page: the active tab's URL, title, main-frame HTTP status and
// a few response headers, its load state, and the last navigation's network
// error. The events come from the target sessions puppeteer already holds for
// every tab (Network and Page domains, whose events page scripts cannot see),
// and the title from the browser target's Target.getTargets; nothing is
// evaluated in a page. The facts ride on the responses computer_plane already
// serves (screenshot, xdotool, health): the spec gives it no state routes.
import type { Browser, CDPSession, HTTPRequest, HTTPResponse, Page, Target } from 'puppeteer-core';
import { EGRESS_HEADER, type EgressProxy } from '../core/egress-proxy.ts';
import { sleep } from '../../shared/abort.ts';

export type LoadState = 'loading' | 'interactive' | 'complete';

export interface PageFacts {
  url: string;
  title: string;
  /** main-frame document status of the last navigation; null until it answered, or when it failed */
  status: number | null;
  /** the headers anti-bot and content checks read, lower-cased */
  headers: Record<string, string>;
  load_state: LoadState;
  /** Chromium's net error of the last navigation (net::ERR_...), or null */
  nav_error: string | null;
  /** counts main-frame navigations: a caller compares it across an action to see one started */
  nav_seq: number;
  /** the last few navigations, oldest first: what each asked for and how it ended, so a caller can judge the one it started even when the browser moved on (a search fallback after an error) */
  navs: NavRecord[];
  updated_at_ms: number;
  /** where the page is drawn on the screen (screen pixels), below the browser's own tab strip and toolbar; on screenshot answers only */
  content?: ContentRect;
}

export interface ContentRect {
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface NavRecord {
  seq: number;
  /** the URL the navigation asked for (its first request, before any redirect): what was typed, as the browser read it */
  url: string;
  /** its main-frame document status, once answered */
  status: number | null;
  /** its net error (net::ERR_..., EGRESS_REFUSED), if it failed */
  error: string | null;
}

/** How many navigations page facts remember. */
const NAVS_KEPT = 4;

const KEPT_HEADERS = ['server', 'cf-ray', 'cf-mitigated', 'content-type', 'location', 'retry-after', 'x-datadome', 'x-px', EGRESS_HEADER];

interface Tracked {
  page: Page;
  targetId: string;
  facts: PageFacts;
  /** the DevTools session DOM snapshots are taken on, made on first use */
  snapshotSession?: Promise<CDPSession>;
  /** when the current navigation's first request was seen */
  navStartedAt: number;
  /** the current navigation's main-frame request (its latest redirect hop): only its answer is the document's status */
  navRequest?: HTTPRequest;
  /** a failed navigation's error being asked of the egress guard: a snapshot waits for it */
  refining?: Promise<void>;
}

/** How long a snapshot waits for the guard to explain a tunnel failure (a name lookup can be slow). */
const REFINE_WAIT_MS = 3_000;

/** How long a snapshot waits for a tab being attached (a popup) before it reports the tab it has. */
const ATTACH_WAIT_MS = 2_000;

/**
 * Whether the page's main frame has fired load, as puppeteer saw it: a popup's load can
 * fire before its listeners here are attached. puppeteer keeps it on the frame (not typed).
 */
function loadSeen(page: Page): boolean {
  const events = (page.mainFrame() as unknown as { _lifecycleEvents?: Set<string> })._lifecycleEvents;
  return events?.has('load') ?? true;
}

/** Most characters of page text one answer carries. */
export const PAGE_TEXT_MAX = 200_000;

/** The target id puppeteer keeps for a target (not part of its typed surface). */
const targetIdOf = (t: Target): string => String((t as unknown as { _targetId?: string })._targetId ?? '');

const copyFacts = (f: PageFacts): PageFacts => ({ ...f, headers: { ...f.headers }, navs: f.navs.map((n) => ({ ...n })) });

/** Copies the current navigation's ending onto its record. */
function recordOutcome(f: PageFacts): void {
  const rec = f.navs.at(-1);
  if (rec?.seq === f.nav_seq) Object.assign(rec, { status: f.status, error: f.nav_error });
}

export class PageFactsTracker {
  private readonly tabs = new Map<Target, Tracked>();
  /** the tab the user last saw change: the most recent to be created or to navigate */
  private active: Tracked | undefined;
  private browserSession: CDPSession | undefined;
  /** tabs still being attached: a snapshot waits for them, so a popup a click just opened is the tab it reports */
  private readonly attaching = new Set<Promise<void>>();

  constructor(
    private readonly browser: Browser,
    private readonly egress: EgressProxy,
  ) {}

  async start(): Promise<void> {
    this.browser.on('targetcreated', (t: Target) => {
      const p = this.track(t).catch(() => undefined);
      this.attaching.add(p);
      void p.finally(() => this.attaching.delete(p));
    });
    this.browser.on('targetdestroyed', (t: Target) => this.untrack(t));
    for (const t of this.browser.targets()) await this.track(t);
    this.browserSession = await this.browser.target().createCDPSession();
  }

  private async track(t: Target): Promise<void> {
    if (t.type() !== 'page' || this.tabs.has(t)) return;
    // a popup's target names the URL it is opening (window.open('/x')) before its page is attached
    const opening = t.opener() !== undefined && /^https?:/.test(t.url());
    const page = await t.page().catch(() => null);
    if (!page) return;
    const tracked: Tracked = {
      page,
      targetId: targetIdOf(t),
      navStartedAt: Date.now(),
      facts: { url: page.url() || t.url(), title: '', status: null, headers: {}, load_state: opening && !loadSeen(page) ? 'loading' : 'complete', nav_error: null, nav_seq: 0, navs: [], updated_at_ms: Date.now() },
    };
    this.tabs.set(t, tracked);
    this.active = tracked;
    const f = tracked.facts;
    const touch = () => {
      f.updated_at_ms = Date.now();
      this.active = tracked;
    };
    const main = (req: HTTPRequest) => req.isNavigationRequest() && req.frame() === page.mainFrame();
    page.on('request', (req) => {
      if (!main(req)) return;
      // a redirect hop is the same navigation: only the first request starts one
      if (req.redirectChain().length === 0) {
        f.nav_seq += 1;
        tracked.navStartedAt = Date.now();
        f.navs = [...f.navs.slice(1 - NAVS_KEPT), { seq: f.nav_seq, url: req.url(), status: null, error: null }];
      }
      tracked.navRequest = req;
      Object.assign(f, { url: req.url(), status: null, headers: {}, nav_error: null, load_state: 'loading' });
      touch();
    });
    page.on('response', (res: HTTPResponse) => {
      const req = res.request();
      if (!main(req) || res.status() >= 300 && res.status() < 400) return;
      // the answer of a document the tab already left (puppeteer can hold a response back for its extra
      // info past the next navigation's start): a challenge's 403 stuck to the page that replaced it (issue 40)
      if (tracked.navRequest && req !== tracked.navRequest) return;
      const all = res.headers();
      f.headers = Object.fromEntries(KEPT_HEADERS.filter((h) => all[h] !== undefined).map((h) => [h, String(all[h]).slice(0, 200)]));
      const said = all[EGRESS_HEADER];
      // the egress proxy's own 502 for a target it could not reach is a network error, not the site's answer
      if (said && /^ERR_[A-Z_]+$/.test(said)) Object.assign(f, { status: null, nav_error: `net::${said}` });
      else if (said === 'blocked') Object.assign(f, { status: null, nav_error: 'EGRESS_REFUSED' });
      else f.status = res.status();
      recordOutcome(f);
      touch();
    });
    page.on('requestfailed', (req) => {
      if (!main(req)) return;
      const text = req.failure()?.errorText ?? 'net::ERR_FAILED';
      Object.assign(f, { nav_error: text, status: null });
      recordOutcome(f);
      touch();
      if (!text.includes('ERR_TUNNEL_CONNECTION_FAILED')) return;
      const refining = this.explain(tracked, f.nav_seq, req.url()).finally(() => {
        if (tracked.refining === refining) tracked.refining = undefined;
      });
      tracked.refining = refining;
    });
    page.on('domcontentloaded', () => {
      if (f.load_state === 'loading') f.load_state = 'interactive';
      touch();
    });
    page.on('load', () => {
      f.load_state = 'complete';
      touch();
    });
    page.on('framenavigated', (frame) => {
      if (frame !== page.mainFrame()) return;
      // an error page commits too (chrome-error://): the URL the user asked for is the fact
      if (!frame.url().startsWith('chrome-error://')) f.url = frame.url();
      touch();
    });
  }

  private untrack(t: Target): void {
    const tracked = this.tabs.get(t);
    this.tabs.delete(t);
    if (tracked && this.active === tracked) this.active = [...this.tabs.values()].at(-1);
  }

  /**
   * A tunnel failure says only that the proxy did not open the tunnel: the guard says why
   * (a name that does not resolve read as a tunnel failure is a 5xx, retried, not the 4xx
   * it is). Rewrites that navigation's error; a snapshot waits for this.
   */
  private async explain(t: Tracked, seq: number, url: string): Promise<void> {
    let host: string;
    try {
      host = new URL(url).hostname.replace(/^\[|\]$/g, '');
    } catch {
      return;
    }
    const why = await this.egress.explainTunnel(host, t.navStartedAt).catch(() => null);
    if (!why) return;
    const error = why === 'EGRESS_REFUSED' ? why : `net::${why}`;
    const f = t.facts;
    const tunnel = (e: string | null | undefined) => e?.includes('ERR_TUNNEL_CONNECTION_FAILED') === true;
    const rec = f.navs.find((n) => n.seq === seq);
    if (rec && tunnel(rec.error)) rec.error = error;
    if (f.nav_seq === seq && tunnel(f.nav_error)) f.nav_error = error;
    f.updated_at_ms = Date.now();
  }

  /**
   * The active tab's facts now, its title read from the browser target (not the page);
   * `content`: with the page's place on a screen of `content.width` x `content.height`.
   */
  async snapshot(o: { content?: { width: number; height: number } } = {}): Promise<PageFacts | null> {
    if (this.attaching.size > 0) await Promise.race([Promise.all(this.attaching), sleep(ATTACH_WAIT_MS)]);
    const t = this.active;
    if (!t) return null;
    if (t.refining) await Promise.race([t.refining, sleep(REFINE_WAIT_MS)]);
    const [shownUrl, content] = await Promise.all([this.readTitle(t), o.content ? this.contentRect(t, o.content).catch(() => undefined) : undefined]);
    const f = copyFacts(t.facts);
    // the title is the document the browser shows now; a status of another one is not told beside it
    if (shownUrl !== undefined && f.status !== null && !sameDocumentUrl(shownUrl, f.url)) Object.assign(f, { status: null, headers: {} });
    return content ? { ...f, content } : f;
  }

  /** Where the active tab's page is drawn on a screen of this size, without the other facts (the live screen crops to it). */
  async content(screen: { width: number; height: number }): Promise<ContentRect | undefined> {
    const t = this.active;
    return t ? this.contentRect(t, screen).catch(() => undefined) : undefined;
  }

  /** Reads the tab's title from the browser; answers the URL the browser shows it at (undefined when unknown). */
  private async readTitle(t: Tracked): Promise<string | undefined> {
    if (!this.browserSession || !t.targetId) return undefined;
    const r = (await this.browserSession.send('Target.getTargets').catch(() => undefined)) as { targetInfos: Array<{ targetId: string; title: string; url: string }> } | undefined;
    const info = r?.targetInfos.find((i) => i.targetId === t.targetId);
    // Chromium titles an untitled page with its URL; that is not a title
    if (info) t.facts.title = info.title === info.url || info.title === stripScheme(info.url) ? '' : info.title.slice(0, 300);
    return info?.url;
  }

  /**
   * Where the page is drawn: the window's bounds (browser target) less what the
   * browser draws above the page, whose height is the window's less the
   * viewport's (Page.getLayoutMetrics, a read of the renderer's layout that runs
   * nothing in the page). A scrollbar makes the viewport read smaller, so the
   * rect errs into the page, never into the toolbar (measured: a 1279x719 window
   * on a 1280x720 screen draws its 632-row viewport in rows 87-718). Clipped to the screen.
   */
  private async contentRect(t: Tracked, screen: { width: number; height: number }): Promise<ContentRect | undefined> {
    if (!this.browserSession || !t.targetId) return undefined;
    const session = await (t.snapshotSession ??= t.page.createCDPSession());
    const [win, metrics] = (await Promise.all([
      this.browserSession.send('Browser.getWindowForTarget', { targetId: t.targetId }),
      session.send('Page.getLayoutMetrics'),
    ])) as [{ bounds: { left?: number; top?: number; width?: number; height?: number } }, { cssVisualViewport: { clientWidth: number; clientHeight: number } }];
    const { left = 0, top = 0, width = screen.width, height = screen.height } = win.bounds;
    const vh = Math.round(metrics.cssVisualViewport.clientHeight);
    if (!(vh > 0) || vh > height) return undefined;
    const x0 = Math.max(0, left);
    const y0 = Math.max(0, top + height - vh);
    const x1 = Math.min(screen.width, left + width);
    const y1 = Math.min(screen.height, top + height);
    return x1 > x0 && y1 > y0 ? { x: x0, y: y0, width: x1 - x0, height: y1 - y0 } : undefined;
  }

  /**
   * The active tab's rendered text, from a DOM snapshot (DOMSnapshot.captureSnapshot:
   * a one-shot read of the layout tree that needs no domain enabled and runs no
   * script in the page, so the page cannot tell). Text of laid-out nodes only:
   * what is rendered, not hidden markup. Capped at PAGE_TEXT_MAX characters.
   */
  async text(): Promise<string | null> {
    const t = this.active;
    if (!t) return null;
    const session = await (t.snapshotSession ??= t.page.createCDPSession()).catch(() => undefined);
    if (!session) return null;
    const snap = (await session.send('DOMSnapshot.captureSnapshot', { computedStyles: [] }).catch(() => undefined)) as
      | { documents: Array<{ layout: { text: number[] } }>; strings: string[] }
      | undefined;
    if (!snap) return null;
    const parts: string[] = [];
    let n = 0;
    for (const doc of snap.documents) {
      for (const i of doc.layout.text) {
        const s = i >= 0 ? snap.strings[i] : undefined;
        if (!s) continue;
        parts.push(s);
        n += s.length + 1;
        if (n >= PAGE_TEXT_MAX) return parts.join(' ').slice(0, PAGE_TEXT_MAX);
      }
    }
    return parts.join(' ');
  }

  /** The tab the user sees: the most recent to be created or to navigate. */
  activePage(): Page | undefined {
    return this.active?.page;
  }

  /** The active tab's facts as last known, without asking the browser for its title again (health is synchronous). */
  cached(): PageFacts | null {
    return this.active ? copyFacts(this.active.facts) : null;
  }

  async close(): Promise<void> {
    await this.browserSession?.detach().catch(() => undefined);
  }
}

const stripScheme = (url: string): string => url.replace(/^[a-z]+:\/\//, '');

/** Two URLs of one document as far as a URL can tell: equal but for the fragment (a reload keeps the URL: the request guard covers it). */
const sameDocumentUrl = (a: string, b: string): boolean => a.split('#')[0] === b.split('#')[0];
