// The browser a dom_plane session runs on, and the warm pools it is lent from: headless
// browsers on throwaway profiles, for sessions that ask for no persisted profile and no
// extra flags, lent with a fresh context of their own and given back after the session
// (reuse.ts). A browser's time zone and locale are set at its start (geo.ts): a session
// whose proxy exit has another geo than the pool's runs on a browser of that geo, which
// then stays warm in that geo's pool for the next such session (keyed-pools.ts). A
// persisted profile or extra flags get a browser of their own, closed after the session.
import type { BrowserContext } from 'puppeteer-core';
import { closeLaunched, headlessBrowser, launchChromium, withEgress, type Launched } from '../core/chromium.ts';
import { sessionEgress } from '../core/egress-proxy.ts';
import { WarmPool } from '../core/pool.ts';
import { KeyedPools } from '../core/keyed-pools.ts';
import { profileDir } from '../core/validate.ts';
import type { PlaneFactory, SessionInitRequest } from '../core/types.ts';
import { geoFor, geoLaunch, sameGeo, type Geo } from '../core/geo.ts';
import { stealthSwitches } from '../core/flags.ts';
import { answers, browserSessions, clearSession, freshContext, renew, spareFor, type WarmBrowser } from './reuse.ts';

const POOL_VIEWPORT: [number, number] = [1280, 720];
/** How long a session waits for a pooled browser being made or renewed before it launches one of its own. */
const BORROW_WAIT_MS = 30_000;
let pool: WarmPool<WarmBrowser> | undefined;
/** work a session's release left running (a retired browser's close, its replacement): waited for by stopPool */
const pending = new Set<Promise<unknown>>();
function background(work: Promise<unknown>): void {
  const p = work.catch(() => undefined).finally(() => pending.delete(p));
  pending.add(p);
}
let geoPools: KeyedPools<WarmBrowser> | undefined;
const geoKey = (g: Geo | undefined): string => (g ? `${g.tz}|${g.locale}` : '');
const geoOfKey = (key: string): Geo | undefined => {
  const [tz, locale] = key.split('|');
  return tz && locale ? { tz, locale } : undefined;
};

/** Geo consistency (SERVICE_GEO_CONSISTENCY) applies on dom_plane too: time zone and locale of the proxy exit. */
const geoOf = (init: { proxy_server: string | null; proxy_exit?: SessionInitRequest['proxy_exit'] }): Geo | undefined => (stealthSwitches().geo_consistency ? geoFor(init) : undefined);

/**
 * A browser for a pool: throwaway profile, POOL_VIEWPORT, `geo`, and the next session's context
 * made ahead. The default context's launch tab is closed here, not when a CDP client connects
 * (Playwright would count it as the client's page): nothing of a pooled browser uses it, and on
 * the connect path its close cost 30-180 ms (measured at load 20).
 */
async function pooledBrowser(geo: Geo | undefined, init?: SessionInitRequest): Promise<WarmBrowser> {
  const l = await withEgress(init, undefined, (dir, egress, home) => launchHeadless(dir, egress, home, POOL_VIEWPORT, [], geo));
  try {
    const warm = await freshContext(l, 0);
    await Promise.all((await l.browser.defaultBrowserContext().pages()).map((p) => p.close()));
    return warm;
  } catch (err) {
    await closeLaunched(l);
    throw err;
  }
}

/** PLANE_DOM_BROWSER, read (and checked) once: the agent refused to start on a bad value (serve.ts). */
let shell: boolean | undefined;

function launchHeadless(dir: string, egress: Launched['egress'], home: string, viewport: [number, number], flags: string[], geo: Geo | undefined) {
  const g = geoLaunch(geo);
  shell ??= headlessBrowser() === 'headless-shell';
  return launchChromium({ userDataDir: dir, headless: shell ? 'shell' : true, viewport, egress, home, extraFlags: [...flags, ...g.flags], env: g.env });
}

/**
 * A pooled browser's tabs open at POOL_VIEWPORT: a session that asked for another size
 * gets it on every tab of its context, the first and those it opens (set once puppeteer
 * has made the page, which applies its default size first).
 */
async function sized(context: BrowserContext, [width, height]: [number, number]): Promise<void> {
  if (width === POOL_VIEWPORT[0] && height === POOL_VIEWPORT[1]) return;
  context.on('targetcreated', (t) => void t.page().then((p) => p?.setViewport({ width, height })).catch(() => undefined));
  for (const p of await context.pages()) await p.setViewport({ width, height });
}

export interface SessionBrowser {
  launched: Launched;
  context: BrowserContext;
  /** lent by a warm pool (a browser that was already up) */
  pooled: boolean;
  /**
   * Starts making what serves the next session: a pooled browser's next context, or on its
   * last session the browser that replaces it. Called as the session closes: beside the
   * recording's finish (which takes longer), not after it, and not during the session (its
   * first steps paid for a renderer's start).
   */
  prepareNext(): void;
  /** The browser is not lent again after this session (a tenant had raw CDP on it): release closes it. */
  retireAfter(): void;
  /** Ends what the session used: a pooled browser is cleared of it and goes back to its pool, a browser of its own is closed. */
  release(): Promise<void>;
}

/** The browser and context a session starts on, its egress guard set to the session's policy. */
export async function sessionBrowser(init: SessionInitRequest, dataDir: string): Promise<SessionBrowser> {
  const geo = geoOf(init);
  // a pooled browser fits a session with its time zone and locale (its viewport is set per tab of the session's context, see sized)
  const reusable = !init.persist_profile && init.chrome_flags.length === 0;
  const lender = !reusable || !pool ? undefined : sameGeo(geo, geoOf({ proxy_server: null })) ? pool : geoPools?.poolFor(geoKey(geo));
  let warm = await lender?.borrowSoon(BORROW_WAIT_MS);
  // A pooled browser that died while it waited is retired.
  if (warm && !(await answers(warm))) {
    await lender!.giveBack(closeLaunched(warm.launched).then(() => undefined));
    warm = undefined;
  }
  const pooled = warm !== undefined;
  let launched: Launched | undefined = warm?.launched;
  let spare: Promise<WarmBrowser> | undefined;
  let retire = false;
  const release = async (): Promise<void> => {
    if (!warm || !lender) return closeLaunched(launched);
    const w = warm;
    const next = spare;
    if (retire) {
      // Nobody waits for a retired browser's close (1.3-2 s of the release of a CDP session,
      // measured): it goes on in the background, owned by the agent (stopPool waits for it),
      // while the pool takes the replacement made as the session closed (or makes one).
      background(closeLaunched(w.launched));
      background(lender.giveBack((next ?? Promise.resolve(undefined)).then((n) => (n && n.launched !== w.launched ? n : undefined))));
      return;
    }
    await lender.giveBack(
      clearSession(w).then(
        () => renew(w, browserSessions(), next),
        // a browser that could not be cleared serves nobody else
        async (err: unknown) => {
          await Promise.all([closeLaunched(w.launched), next?.then((n) => closeLaunched(n.launched)).catch(() => undefined)]);
          throw err;
        },
      ),
    );
  };
  try {
    if (launched) launched.egress.configure(sessionEgress(init));
    else if (lender && lender !== pool) {
      // the geo's pool had none ready: this session's browser is made as a pooled one, and the pool takes it after the session
      warm = await pooledBrowser(geo, init);
      launched = warm.launched;
      lender.adopt();
    } else {
      const userDataDir = init.persist_profile ? profileDir(dataDir, init.tenant_id, init.profile_id) : undefined;
      launched = await withEgress(init, userDataDir, (dir, egress, home) => launchHeadless(dir, egress, home, init.viewport, init.chrome_flags, geo));
    }
    const context = warm?.context ?? launched.browser.defaultBrowserContext();
    if (warm) await sized(context, init.viewport);
    return {
      launched,
      context,
      pooled,
      prepareNext() {
        if (warm && !spare) spare = spareFor(warm, retire ? 0 : browserSessions(), () => pooledBrowser(geo));
      },
      retireAfter() {
        retire = true;
      },
      release,
    };
  } catch (err) {
    await release();
    throw err;
  }
}

/** dom_plane's warm pools (PLANE_WARM_POOL): the main one, and one per geo a session needed. */
export const warmPools: Pick<PlaneFactory, 'startPool' | 'stopPool' | 'poolReady' | 'poolCapacity' | 'geoPoolsReady'> = {
  startPool(size, log, opts) {
    const dispose = (w: WarmBrowser) => closeLaunched(w.launched);
    pool ??= new WarmPool(size, () => pooledBrowser(geoOf({ proxy_server: null })), dispose, log);
    pool.fill();
    const g = opts.geoPools;
    geoPools ??= new KeyedPools(g.max, g.idleSeconds * 1000, (key) => pooledBrowser(geoOfKey(key)), dispose, log);
  },
  async stopPool() {
    await Promise.all([...pending]);
    await Promise.all([pool?.close(), geoPools?.close()]);
    pool = undefined;
    geoPools = undefined;
  },
  poolReady: () => pool?.readyCount ?? 0,
  poolCapacity: () => pool?.size ?? 0,
  geoPoolsReady: () => geoPools?.readyByKey() ?? {},
};
