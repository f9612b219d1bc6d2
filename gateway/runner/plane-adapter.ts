// Adapts a plane session (the wire contract client) to the plugin contract's
// Plane: the service's action vocabulary performed with xdotool on
// computer_plane (real input on a real display, never a hidden DOM path) and
// with input dispatch on dom_plane, plus the DOM surface where there is one.
import { PlaneCallError, type PlaneSession } from '../planes/index.ts';
import { SecretRefused, type Action, type ActResult, type Capabilities, type DomSurface, type NavError, type PageFacts, type Plane, type Screenshot } from '../plugins/contract.ts';
import { frameDigest, pageArea } from './fingerprint.ts';

const wait = (s: number) => new Promise((r) => setTimeout(r, Math.max(0, s) * 1000));
const px = (n: number) => String(Math.round(n));

/** xdotool argv for one action on computer_plane. */
export function xdotoolArgv(a: Action): string[][] {
  switch (a.type) {
    // --delay 0: xdotool otherwise sleeps its 100 ms repeat delay even after a single click
    case 'CLICK':
      return [['mousemove', px(a.x), px(a.y), 'click', '--delay', '0', '1']];
    case 'DOUBLE_CLICK':
      return [['mousemove', px(a.x), px(a.y), 'click', '--repeat', '2', '--delay', '80', '1']];
    case 'RIGHT_CLICK':
      return [['mousemove', px(a.x), px(a.y), 'click', '--delay', '0', '3']];
    case 'TRIPLE_CLICK':
      return [['mousemove', px(a.x), px(a.y), 'click', '--repeat', '3', '--delay', '80', '1']];
    case 'MIDDLE_CLICK':
      return [['mousemove', px(a.x), px(a.y), 'click', '--delay', '0', '2']];
    case 'HOLD_KEY': {
      const keys = a.keys.split('+').filter(Boolean);
      return [['keydown', '--clearmodifiers', ...keys, 'sleep', holdSeconds(a.seconds).toFixed(2), 'keyup', ...keys.reverse()]];
    }
    case 'DRAG':
      return [['mousemove', px(a.x), px(a.y), 'mousedown', '1', 'mousemove', px(a.to_x), px(a.to_y), 'mouseup', '1']];
    case 'TYPE':
      return [['type', '--delay', '8', '--', a.text]];
    case 'KEY_PRESS':
      return [['key', '--clearmodifiers', ...a.keys.split(/\s+/).filter(Boolean)]];
    case 'SCROLL': {
      const button = { up: '4', down: '5', left: '6', right: '7' }[a.direction];
      const move = a.x !== undefined && a.y !== undefined ? ['mousemove', px(a.x), px(a.y)] : [];
      return [[...move, 'click', '--repeat', String(Math.max(1, Math.round(a.amount))), '--delay', '20', button]];
    }
    case 'NAVIGATE':
      return [['key', '--clearmodifiers', 'ctrl+l'], ['type', '--delay', '2', '--', a.url], ['key', 'Return']];
    default:
      return [];
  }
}

/** xdotool key names and combos to the DOM plane's key names (single keys only). */
const DOM_KEYS: Record<string, string> = {
  return: 'Enter',
  enter: 'Enter',
  kp_enter: 'Enter',
  backspace: 'Backspace',
  tab: 'Tab',
  escape: 'Escape',
  esc: 'Escape',
  space: 'Space',
  delete: 'Delete',
  home: 'Home',
  end: 'End',
  page_up: 'PageUp',
  prior: 'PageUp',
  page_down: 'PageDown',
  next: 'PageDown',
  left: 'ArrowLeft',
  right: 'ArrowRight',
  up: 'ArrowUp',
  down: 'ArrowDown',
};

/** How long a HOLD_KEY holds its keys: at most 10 s, so a step's deadline is never spent on one. */
export const holdSeconds = (s: number): number => Math.min(10, Math.max(0, Number.isFinite(s) ? s : 0));

/** A key for raw input on dom_plane (the live/input op): its DOM key and code, from an xdotool name. */
export function liveKey(name: string): { key: string; code: string } {
  const key = domKey(name.length === 1 ? name : (MODIFIER_KEYS[name.toLowerCase()] ?? name));
  if (key.length === 1 && /[a-z]/i.test(key)) return { key, code: `Key${key.toUpperCase()}` };
  if (key.length === 1 && /[0-9]/.test(key)) return { key, code: `Digit${key}` };
  return { key, code: ['Shift', 'Control', 'Alt', 'Meta'].includes(key) ? `${key}Left` : key };
}
const MODIFIER_KEYS: Record<string, string> = { shift: 'Shift', ctrl: 'Control', control: 'Control', alt: 'Alt', super: 'Meta', meta: 'Meta', cmd: 'Meta' };

export function domKey(keys: string): string {
  if (keys.includes('+') && keys.length > 1) throw new Error(`key combination '${keys}' is not supported on dom_plane`);
  return DOM_KEYS[keys.toLowerCase()] ?? keys;
}

function evaluator(session: PlaneSession) {
  return async <T>(expression: string): Promise<T> => {
    const r = await session.cdp(expression, { awaitPromise: true });
    const value = JSON.parse(r.result_json) as unknown;
    if (r.returncode !== 0) throw new Error(`page script failed: ${(value as { error?: string })?.error ?? 'exception'}`.slice(0, 300));
    return value as T;
  };
}

function domSurface(session: PlaneSession): DomSurface {
  const evaluate = evaluator(session);
  return {
    currentUrl: async () => (await session.currentUrl()).url,
    pageLoad: async () => {
      const p = await session.pageLoad();
      return { ready_state: p.ready_state, last_resource_ms: p.last_resource_ms };
    },
    tabs: async () => (await session.tabs()).map((t) => ({ tab_id: t.id, title: t.title, url: t.url, is_active: t.is_active })),
    openInNew: async (target) => {
      const r = await session.openInNew(target);
      return { tab_id: r.tab_id, url: r.url };
    },
    closeTab: async (tabId) => {
      await session.closeTab(tabId);
    },
    activateTab: async (tabId) => ({ url: (await session.activateTab(tabId)).url }),
    peek: async (target) => {
      const r = await session.peekTarget(target);
      return { href: r.href ?? null, target: r.target ?? null, tag: r.tag ?? null };
    },
    safeBack: async (pattern) => {
      const r = await session.safeBack(pattern ?? '');
      return { moved: r.went_back, url: r.url };
    },
    evaluate,
  };
}

/**
 * The navigation error in a dom_plane agent's refusal of a navigate: 422 with
 * the browser's `net::ERR_*` (or puppeteer's navigation timeout), 403 from the
 * egress guard. Anything else (a lost session, a bad request) stays an error.
 */
export function navErrorOf(err: unknown): NavError | undefined {
  if (!(err instanceof PlaneCallError)) return undefined;
  if (err.status === 403 && /egress guard/.test(err.detail)) return { code: 'EGRESS_REFUSED', message: err.detail.slice(0, 300) };
  if (err.status !== 422 || !/^navigation failed/.test(err.detail)) return undefined;
  const code = /net::(ERR_[A-Z0-9_]+)/.exec(err.detail)?.[1] ?? (/timeout/i.test(err.detail) ? 'NAV_TIMEOUT' : 'ERR_FAILED');
  return { code, message: err.detail.replace(/^navigation failed:\s*/, '').slice(0, 300) };
}

async function screenshot(session: PlaneSession, format: 'png' | 'jpeg' = 'png'): Promise<Screenshot> {
  return session.screenshot(format);
}

/** A credential reaches a plane only as its value (secret-plane.ts resolves it): an action still naming one would type its placeholder. */
function refuseUnresolved(a: Action): void {
  if (a.type === 'TYPE' && a.secret) throw new SecretRefused('this plane has no credential vault in front of it; nothing was typed');
}

export function adaptPlane(session: PlaneSession, capabilities: Capabilities): Plane {
  if (capabilities.dom_aware) {
    const dom = domSurface(session);
    // the dialogs the agent handled during this action's dispatches, for its result
    let met: NonNullable<ActResult['dialogs']> = [];
    const live = (input: Record<string, unknown>) => session.call('live/input', 'POST', { input });
    const dispatch = async (body: Parameters<PlaneSession['dispatch']>[0]) => {
      const d = await session.dispatch(body);
      if (d.dialogs) met.push(...d.dialogs);
      return d;
    };
    const at = (x: number, y: number, type: string, detail: number) =>
      `(() => { const el = document.elementFromPoint(${x}, ${y}); if (!el) return false; const o = { bubbles: true, cancelable: true, clientX: ${x}, clientY: ${y}, detail: ${detail}, button: ${type === 'contextmenu' ? 2 : 0} }; el.dispatchEvent(new MouseEvent(${JSON.stringify(type)}, o)); return true; })()`;
    return {
      capabilities,
      dom,
      screenshot: (format) => screenshot(session, format),
      async act(a: Action): Promise<ActResult> {
        refuseUnresolved(a);
        met = [];
        const r = await actDom(a);
        return met.length > 0 ? { ...r, dialogs: met } : r;
      },
    };

    async function actDom(a: Action): Promise<ActResult> {
      switch (a.type) {
        case 'CLICK': {
          const d = await dispatch({ verb: 'click', x: a.x, y: a.y });
          return { url: d.url, ...(d.settled ? { settled: true } : {}) };
        }
        case 'DOUBLE_CLICK':
          await dispatch({ verb: 'click', x: a.x, y: a.y });
          await dispatch({ verb: 'click', x: a.x, y: a.y });
          await dom.evaluate(at(a.x, a.y, 'dblclick', 2));
          return {};
        case 'RIGHT_CLICK':
          await dom.evaluate(at(a.x, a.y, 'contextmenu', 1));
          return {};
        // raw DevTools input (the live/input op a person's takeover uses): a click count and a button the dispatch verbs lack
        case 'TRIPLE_CLICK':
          for (const clicks of [1, 2, 3]) for (const action of ['down', 'up']) await live({ type: 'mouse', action, x: a.x, y: a.y, button: 'left', clicks });
          return {};
        case 'MIDDLE_CLICK':
          for (const action of ['down', 'up']) await live({ type: 'mouse', action, x: a.x, y: a.y, button: 'middle', clicks: 1 });
          return {};
        case 'HOLD_KEY': {
          const keys = a.keys.split('+').filter(Boolean).map(liveKey);
          for (const k of keys) await live({ type: 'key', action: 'down', ...k });
          await wait(holdSeconds(a.seconds));
          for (const k of keys.reverse()) await live({ type: 'key', action: 'up', ...k });
          return {};
        }
        case 'DRAG':
          return { url: (await dispatch({ verb: 'drag', x: a.x, y: a.y, to_x: a.to_x, to_y: a.to_y })).url };
        case 'TYPE':
          return { url: (await dispatch({ verb: 'type', text: a.text })).url };
        case 'KEY_PRESS':
          return { url: (await dispatch({ verb: 'key', key: domKey(a.keys) })).url };
        case 'SCROLL': {
          const d = Math.round(a.amount * 100);
          const dy = a.direction === 'down' ? d : a.direction === 'up' ? -d : 0;
          const dx = a.direction === 'right' ? d : a.direction === 'left' ? -d : 0;
          return { url: (await dispatch({ verb: 'scroll', dx, dy, x: a.x, y: a.y })).url };
        }
        case 'NAVIGATE': {
          let r: { url: string };
          try {
            r = await dispatch({ verb: 'navigate', url: a.url });
          } catch (err) {
            const nav_error = navErrorOf(err);
            if (!nav_error) throw err;
            return { nav_error, url: await dom.currentUrl().catch(() => '') };
          }
          const status = await dom
            .evaluate<number | null>('(() => { const n = performance.getEntriesByType("navigation")[0]; return n && n.responseStatus ? n.responseStatus : null; })()')
            .catch(() => null);
          return { url: r.url, http_status: status };
        }
        case 'WAIT':
          await wait(a.seconds);
          return {};
        // a person is asked by the runner, never by the plane
        case 'DONE':
        case 'ASK_HUMAN':
          return {};
      }
    }
  }
  // page facts ride on every xdotool reply; a query that moves nothing reads them
  const facts = async (o: { text?: boolean } = {}): Promise<PageFacts | null> => (await session.xdotool(['getmouselocation'], { pageText: o.text === true })).page ?? null;
  return {
    capabilities,
    screenshot: (format) => screenshot(session, format),
    facts,
    async act(a: Action): Promise<ActResult> {
      refuseUnresolved(a);
      if (a.type === 'WAIT') {
        await wait(a.seconds);
        return {};
      }
      const typed = async (): Promise<PageFacts | null | undefined> => {
        let before: PageFacts | null | undefined;
        for (const argv of xdotoolArgv(a)) {
          const r = await session.xdotool(argv);
          before ??= r.page;
          if (r.returncode !== 0) throw new Error(`xdotool ${argv[0]} failed (${r.returncode}): ${r.stderr.slice(0, 200)}`);
        }
        return before;
      };
      if (a.type !== 'NAVIGATE') {
        await typed();
        return {};
      }
      const shownBefore = await shownPage(session);
      // keys typed into the address bar can be lost on a loaded display: a navigation that
      // asked for another origin than the step's is typed again once, then told as it is
      for (let attempt = 1; ; attempt++) {
        const before = await typed();
        if (!before) return {};
        const landed = await awaitNavigation(facts, before.nav_seq);
        // the navigation typed, not a later one the browser started on its own (a search after an error)
        const started = landed.f?.navs?.find((n) => n.seq === before.nav_seq + 1);
        if (!started || sameOrigin(started.url, a.url)) {
          if (!landed.timedOut) await repainted(session, shownBefore);
          return navigationOutcome(landed, started);
        }
        if (attempt === 2) return { url: landed.f!.url, nav_error: { code: 'TYPED_URL_MISMATCH', message: `the address bar sent the browser to ${started.url.slice(0, 300)}, not to the step's URL` } };
      }
    },
  };
}

function sameOrigin(a: string, b: string): boolean {
  try {
    return new URL(a).origin === new URL(b).origin;
  } catch {
    return true;
  }
}

/** The digest of the page's area on screen now (undefined when the plane cannot say). */
async function shownPage(session: PlaneSession): Promise<string | undefined> {
  const shot = await session.screenshot('png').catch(() => undefined);
  return shot ? frameDigest(shot.image, pageArea(shot)) : undefined;
}

/** How long the screen may lag a loaded navigation before the step goes on anyway (the same page again never repaints differently). */
const REPAINT_BUDGET_MS = 2_000;

/**
 * Waits until the page's area on screen differs from `before`. The page facts say a
 * navigation loaded before the window shows it: on a loaded host the display kept the
 * previous page for a second or more, so the step's screenshot, the next step's "before"
 * and what a vision brain saw were of the page the navigation left.
 */
async function repainted(session: PlaneSession, before: string | undefined): Promise<void> {
  if (before === undefined) return;
  const deadline = Date.now() + REPAINT_BUDGET_MS;
  while (Date.now() < deadline) {
    const now = await shownPage(session);
    if (now === undefined || now !== before) return;
    await wait(0.1);
  }
}

/** How long a computer_plane navigation may take to load, as the dom_plane agent allows its own. */
const NAV_BUDGET_MS = 10_000;

/** Polls the page facts until a navigation newer than `seq` has loaded or failed, or the budget ran out. */
async function awaitNavigation(facts: () => Promise<PageFacts | null>, seq: number): Promise<{ f: PageFacts | null; timedOut: boolean }> {
  const deadline = Date.now() + NAV_BUDGET_MS;
  let f: PageFacts | null = null;
  while (Date.now() < deadline) {
    f = await facts().catch(() => f);
    if (f && f.nav_seq > seq && (f.nav_error || f.load_state !== 'loading' || f.navs?.find((n) => n.seq === seq + 1)?.error)) return { f, timedOut: false };
    await wait(0.1);
  }
  return { f, timedOut: true };
}

function navigationOutcome({ f, timedOut }: { f: PageFacts | null; timedOut: boolean }, started?: NonNullable<PageFacts['navs']>[number]): ActResult {
  if (!f) return {};
  if (started?.error) {
    const code = started.error.replace(/^net::/, '');
    return { url: started.url, nav_error: { code, message: started.error } };
  }
  if (f.nav_error) {
    const code = f.nav_error.replace(/^net::/, '');
    return { url: f.url, nav_error: { code, message: f.nav_error } };
  }
  if (timedOut) return { url: f.url, nav_error: { code: 'NAV_TIMEOUT', message: `the page did not load within ${NAV_BUDGET_MS / 1000} s` } };
  return { url: f.url, http_status: f.status };
}
