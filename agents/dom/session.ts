// dom_plane: puppeteer-core on the system Chromium (headless). Structured dispatch plus
// the DOM-aware extensions of the spec; one session per process. The browser (lent by a
// warm pool, or the session's own: browsers.ts) sits behind the session's egress guard;
// the active tab is recorded to WebM.
import type { KeyInput, Page } from 'puppeteer-core';
import { recordingPath } from '../core/chromium.ts';
import { badRequest, forbidden, notFound, unprocessable } from '../core/errors.ts';
import { EGRESS_HEADER, OFF_LIST_REASON, sessionEgress, type EgressProxy } from '../core/egress-proxy.ts';
import { recordingEnabled, recordingFps, recordingSize } from '../core/recording.ts';
import { ScreencastRecorder } from './screencast.ts';
import { cdpEvaluate, scrollY } from '../core/pages.ts';
import { optNum, optStr, str, type Body } from '../core/validate.ts';
import type { OpResult, OpSpec, PlaneFactory, PlaneSessionImpl, SessionInitRequest } from '../core/types.ts';
import { loaded, Tabs } from './tabs.ts';
import { afterInput } from './settle.ts';
import { CLIPBOARD, FOCUSED, inPage, PAGE_LOAD, PEEK } from '../core/inpage.ts';
import { matchesPin } from './pin.ts';
import { LostSignal } from '../core/lost.ts';
import { sessionBrowser, warmPools } from './browsers.ts';
import { DOWNLOAD_ROUTES, downloadDirFor, downloadOps, prepareDownloadDir, removeDownloadDir } from '../core/downloads.ts';
import { CDP_ACTIVITY_ROUTES, CdpActivity, cdpActivityOps } from '../core/cdp-activity.ts';
import { primeRoot } from '../core/cdp-relay.ts';
import { browserUser } from '../core/browser-user.ts';
import { LIVE_ROUTES, liveOps, type LiveInput } from '../core/live.ts';
import { DomLiveScreen } from './live.ts';

const ROUTES = {
  screenshot: 'POST',
  dispatch: 'POST',
  cdp: 'POST',
  'state/current_url': 'GET',
  'state/tabs': 'GET',
  'state/focused_element': 'GET',
  'state/clipboard': 'GET',
  'state/page_load': 'GET',
  'state/safe_back': 'POST',
  'tabs/open_in_new': 'POST',
  'tabs/close': 'POST',
  'tabs/activate': 'POST',
  'links/peek_target': 'POST',
  ...DOWNLOAD_ROUTES,
  ...CDP_ACTIVITY_ROUTES,
  ...LIVE_ROUTES,
} as const;

const NAV_WAIT_MS = 10_000;

function coords(b: Body): { x: number; y: number } | undefined {
  const x = optNum(b, 'x');
  const y = optNum(b, 'y');
  if (x === undefined && y === undefined) return undefined;
  if (x === undefined || y === undefined) throw badRequest('x and y go together');
  return { x, y };
}

async function clickTarget(page: Page, b: Body): Promise<void> {
  const selector = optStr(b, 'selector');
  const at = coords(b);
  if (selector) {
    const el = await page.$(selector).catch(() => {
      throw badRequest('selector is not valid CSS');
    });
    if (!el) throw notFound(`no element matches selector ${selector.slice(0, 200)}`);
    await el.click();
    await el.dispose();
  } else if (at) {
    await page.mouse.click(at.x, at.y);
  } else {
    throw badRequest('click needs x,y or selector');
  }
}

/** An input, waited out, and the popup it opened followed (it becomes the active tab). */
async function input(tabs: Tabs, page: Page, verb: string, run: () => Promise<void>): Promise<Record<string, unknown>> {
  const { result: s, popup } = await tabs.followPopup(page, () => afterInput(page, run, NAV_WAIT_MS), NAV_WAIT_MS);
  if (!popup) return { ok: true, verb, url: page.url(), ...s };
  return { ok: true, verb, url: popup.url(), navigated: true, settled: true, popup: { tab_id: tabs.idOf(popup), opener_tab_id: tabs.idOf(page) } };
}

async function dispatch(tabs: Tabs, b: Body, egress: EgressProxy): Promise<Record<string, unknown>> {
  const page = await tabs.current();
  const verb = str(b, 'verb');
  switch (verb) {
    case 'click':
      return input(tabs, page, verb, () => clickTarget(page, b));
    case 'key': {
      const key = str(b, 'key') as KeyInput;
      return input(tabs, page, verb, () =>
        page.keyboard.press(key).catch((err: unknown) => {
          throw badRequest(`unknown key: ${err instanceof Error ? err.message.slice(0, 100) : ''}`);
        }),
      );
    }
    case 'type': {
      const text = optStr(b, 'text');
      if (text === undefined || text.length > 100_000) throw badRequest('type needs text (at most 100000 characters)');
      if (optStr(b, 'selector') || coords(b)) await clickTarget(page, b);
      await page.keyboard.type(text);
      break;
    }
    case 'scroll': {
      const at = coords(b);
      if (at) await page.mouse.move(at.x, at.y);
      await page.mouse.wheel({ deltaX: optNum(b, 'dx') ?? 0, deltaY: optNum(b, 'dy') ?? 0 });
      break;
    }
    case 'drag': {
      // Extension verb: press at x,y, move in steps to to_x,to_y, release; real input events (CDP), so a page's own
      // mousedown/mousemove/mouseup handlers (a slider, a sortable list, a map) see a drag as from a person
      const from = coords(b);
      const tx = optNum(b, 'to_x');
      const ty = optNum(b, 'to_y');
      if (!from || tx === undefined || ty === undefined) throw badRequest('drag needs x, y, to_x and to_y');
      return input(tabs, page, verb, async () => {
        await page.mouse.move(from.x, from.y);
        await page.mouse.down();
        await page.mouse.move(tx, ty, { steps: 10 });
        await page.mouse.up();
      });
    }
    case 'navigate': {
      // Extension verb: the runner's navigate step needs a way to load a URL.
      const url = str(b, 'url');
      if (!/^https?:\/\//.test(url)) throw badRequest('navigate url must be http(s)');
      const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
      const startedAt = Date.now();
      const res = await page.goto(url, { waitUntil: 'domcontentloaded', timeout: NAV_WAIT_MS }).catch(async (err: unknown) => {
        // an https:// target the guard refused or could not reach fails as a tunnel error: the guard knows why
        // (a name that does not resolve read as a tunnel failure was retried as a 5xx, seen once in CI)
        const why = String(err).includes('ERR_TUNNEL_CONNECTION_FAILED') ? await egress.explainTunnel(host, startedAt) : null;
        if (why === 'EGRESS_REFUSED') throw egressBlocked(host, egress);
        if (why) throw navFailed(why, url);
        throw unprocessable(`navigation failed: ${err instanceof Error ? err.message.split('\n')[0]?.slice(0, 200) : ''}`);
      });
      const said = res?.headers()[EGRESS_HEADER];
      if (said === 'blocked') throw egressBlocked(host, egress);
      // the proxy's own 502 for a target it could not reach is the browser's network error, not the site's answer
      if (said && /^ERR_[A-Z_]+$/.test(said)) throw navFailed(said, url);
      break;
    }
    default:
      throw badRequest('verb must be click, key, type, scroll, drag or navigate');
  }
  return { ok: true, verb, url: page.url() };
}

/** 422 with the browser's net error name, as Chromium words a navigation that failed. */
function navFailed(code: string, url: string): Error {
  return unprocessable(`navigation failed: net::${code} at ${url.slice(0, 200)}`);
}

/**
 * 403 for a navigation the egress guard refused; the runner reports it as navigation_blocked.
 * The host named is the one the guard refused (a redirect's target, not the URL asked for).
 */
function egressBlocked(asked: string, egress: EgressProxy): Error {
  const b = egress.lastBlocked;
  const host = (b?.host ?? asked).slice(0, 200);
  if (b?.why === 'allowed_domains') return forbidden(`navigation blocked by the egress guard: ${host} is ${OFF_LIST_REASON}`);
  return forbidden(`navigation blocked by the egress guard: ${host} is or resolves to a private, loopback, link-local or metadata address`);
}

async function startDom(init: SessionInitRequest, dataDir: string): Promise<PlaneSessionImpl> {
  const downloadDir = prepareDownloadDir(downloadDirFor(dataDir, init.tenant_id, init.run_id), browserUser());
  const activity = new CdpActivity();
  const browser = await sessionBrowser(init, dataDir).catch(async (err: unknown) => {
    await removeDownloadDir(downloadDir);
    throw err;
  });
  const { launched: l, context: ctx } = browser;
  const b = l.browser;
  let tabs: Tabs;
  let recorder: ScreencastRecorder | undefined;
  try {
    tabs = new Tabs(ctx, init.dialogs);
    await tabs.init();
    if (recordingEnabled()) {
      recorder = new ScreencastRecorder(tabs, recordingPath(dataDir, init.tenant_id, init.run_id), recordingFps(), recordingSize(init.viewport));
      recorder.start();
    }
  } catch (err) {
    await recorder?.stop();
    await browser.release();
    await removeDownloadDir(downloadDir);
    throw err;
  }
  const lost = new LostSignal();
  lost.watchBrowser(b);
  const root = init.enable_cdp ? primeRoot(l.endpoint()) : undefined;
  const [width, height] = init.viewport;
  const live = new DomLiveScreen(tabs, init.viewport);
  const op = (http: 'GET' | 'POST', idempotent: boolean, run: (body: Body) => Promise<Record<string, unknown>>): OpSpec => ({
    http,
    idempotent,
    run: async (body) => ({ body: await run(body) }),
  });

  const ops: Record<string, OpSpec> = {
    screenshot: {
      http: 'POST',
      idempotent: false,
      async run(body: Body): Promise<OpResult> {
        const format = optStr(body, 'format') ?? 'png';
        if (format !== 'png' && format !== 'jpeg' && format !== 'webp') throw badRequest('format must be png, jpeg or webp');
        const page = await tabs.current();
        // the scroll is read while the frame is made, not after it (a round trip less on every step)
        const [shot, sy] = await Promise.all([page.screenshot({ type: format, optimizeForSpeed: true, ...(format === 'png' ? {} : { quality: 80 }) }), scrollY(page)]);
        return { body: { width, height, scroll_y: sy, captured_at_ms: Date.now(), format }, blob: Buffer.from(shot) };
      },
    },
    dispatch: op('POST', true, async (body) => {
      const r = await dispatch(tabs, body, l.egress);
      const dialogs = tabs.takeDialogs();
      return dialogs.length > 0 ? { ...r, dialogs } : r;
    }),
    cdp: op('POST', true, async (body) => cdpEvaluate(await tabs.current(), body)),
    'state/current_url': op('GET', false, async () => {
      const p = await tabs.current();
      return { url: p.url(), tab_id: tabs.idOf(p) };
    }),
    'state/tabs': op('GET', false, async () => {
      const active = await tabs.current();
      const pages = await tabs.list();
      const list = await Promise.all(
        pages.map(async (p) => ({ id: tabs.idOf(p), title: await p.title().catch(() => ''), url: p.url(), is_active: p === active })),
      );
      return { tabs: list };
    }),
    'state/focused_element': op('GET', false, async () => {
      const p = await tabs.current();
      const element = await inPage<Record<string, unknown> | null>(p, FOCUSED);
      return { element };
    }),
    'state/clipboard': op('GET', false, async () => {
      const p = await tabs.current();
      // Best effort: denied or unavailable permission reads as an empty string.
      const text = await inPage<unknown>(p, CLIPBOARD).catch(() => '');
      return { text: typeof text === 'string' ? text : '' };
    }),
    'state/page_load': op('GET', false, async () => {
      const p = await tabs.current();
      return inPage<Record<string, unknown>>(p, PAGE_LOAD);
    }),
    'state/safe_back': op('POST', true, async (body) => {
      const pattern = optStr(body, 'pinned_origin_pattern') ?? optStr(body, 'pinned_source_url_pattern') ?? '';
      const p = await tabs.current();
      const cdp = await p.createCDPSession();
      let hist: { currentIndex: number; entries: { url: string }[] };
      try {
        hist = (await cdp.send('Page.getNavigationHistory')) as typeof hist;
      } finally {
        await cdp.detach().catch(() => undefined);
      }
      const prev = hist.entries[hist.currentIndex - 1]?.url;
      if (!prev) return { went_back: false, reason: 'no_history', url: p.url() };
      if (pattern && !matchesPin(prev, pattern)) return { went_back: false, reason: 'overshoot', url: p.url(), refused_url: prev };
      await p.goBack({ waitUntil: 'domcontentloaded', timeout: NAV_WAIT_MS }).catch(() => undefined);
      return { went_back: true, url: p.url() };
    }),
    'tabs/open_in_new': op('POST', true, async (body) => {
      const url = optStr(body, 'url');
      const via = optStr(body, 'via_selector');
      if (Boolean(url) === Boolean(via)) throw badRequest('give exactly one of url or via_selector');
      let page: Page;
      if (url) {
        if (!/^(https?:|about:blank$)/.test(url)) throw badRequest('url must be http(s)');
        page = await ctx.newPage();
        const res = await page.goto(url, { waitUntil: 'domcontentloaded', timeout: NAV_WAIT_MS }).catch(() => undefined);
        if (res?.headers()[EGRESS_HEADER] === 'blocked') {
          await page.close().catch(() => undefined);
          throw egressBlocked(new URL(url).hostname, l.egress);
        }
      } else {
        const opener = await tabs.current();
        const popup = tabs.waitPopup(opener, NAV_WAIT_MS);
        try {
          await clickTarget(opener, { selector: via });
        } catch (err) {
          popup.cancel();
          throw err;
        }
        const p = await popup.promise;
        if (!p) throw unprocessable('the click did not open a new tab');
        page = p;
        await loaded(page, Date.now() + NAV_WAIT_MS);
      }
      await tabs.activate(page);
      return { tab_id: tabs.idOf(page), url: page.url(), title: await page.title().catch(() => '') };
    }),
    'tabs/close': op('POST', true, async (body) => {
      const p = await tabs.byId(str(body, 'tab_id'));
      const id = tabs.idOf(p);
      await p.close();
      const now = await tabs.current();
      return { closed_tab_id: id, active_tab_id: tabs.idOf(now), url: now.url() };
    }),
    'tabs/activate': op('POST', true, async (body) => {
      const p = await tabs.byId(str(body, 'tab_id'));
      await tabs.activate(p);
      return { tab_id: tabs.idOf(p), url: p.url() };
    }),
    'links/peek_target': op('POST', false, async (body) => {
      const selector = optStr(body, 'selector');
      const bbox = body.bbox;
      let box: number[] | undefined;
      if (bbox !== undefined) {
        if (!Array.isArray(bbox) || bbox.length !== 4 || !bbox.every((n) => typeof n === 'number' && Number.isFinite(n))) {
          throw badRequest('bbox must be [x1, y1, x2, y2]');
        }
        box = bbox as number[];
      }
      if (Boolean(selector) === Boolean(box)) throw badRequest('give exactly one of selector or bbox');
      const p = await tabs.current();
      const found = await inPage<Record<string, unknown> | null>(p, PEEK, { selector: selector ?? null, bbox: box ?? null }).catch(() => {
        throw badRequest('selector is not valid CSS');
      });
      if (!found) throw notFound('no link at the given selector or bbox');
      return found;
    }),
    ...downloadOps(downloadDir),
    ...cdpActivityOps(activity),
    // a person's inputs count in the session's trace as a CDP client's do (a pointer move changes nothing)
    ...liveOps(live, (i: LiveInput) => (i.type === 'mouse' && i.action === 'move' ? undefined : activity.note(`Input.live.${i.type}`, {}))),
  };

  return {
    chromePid: b.process()?.pid ?? null,
    display: '',
    capabilities: { dom_aware: true, stealth: false, supports_cdp: true, backend: 'dom_plane' },
    ops,
    warm: browser.pooled,
    recordingFile: recorder?.file,
    setProxy: (proxyServer) => l.egress.configure(sessionEgress({ ...init, proxy_server: proxyServer })),
    health: () => ({ egress: l.egress.status(), recording: recorder !== undefined }),
    lost,
    downloadDir,
    cdpActivity: activity,
    ...(ctx.id ? { cdpContextId: ctx.id } : {}),
    cdpEndpoint: async () => {
      // a tenant with browser-wide CDP could leave anything in it: this browser serves nobody after
      browser.retireAfter();
      tabs.leaveDialogsToClient();
      // a lent context: the default context's launch tab would be the first page the client sees
      // (Playwright counts every page of a context it did not make as its default context's)
      if (ctx.id) await Promise.all((await b.defaultBrowserContext().pages()).map((p) => p.close().catch(() => undefined)));
      return l.endpoint();
    },
    ...(root ? { cdpSocket: () => root.take() } : {}),
    close: async () => {
      root?.close();
      lost.closingNow();
      browser.prepareNext();
      await live.stop();
      await recorder?.stop();
      await browser.release();
      await removeDownloadDir(downloadDir);
    },
  };
}

export const domPlane: PlaneFactory = {
  backend: 'dom_plane',
  domAware: true,
  routes: ROUTES,
  start: startDom,
  ...warmPools,
};
