// computer_plane: Xvfb + headful Chromium + xdotool. The brain sees pixels only; input
// goes through xdotool on the session's own display. The browser sits behind the
// session's egress guard; the display is recorded to WebM while the session lives.
import type { Browser } from 'puppeteer-core';
import { closeChromium, closeLaunched, launchChromium, recordingPath, withEgress, type Launched } from '../core/chromium.ts';
import { badRequest, forbidden } from '../core/errors.ts';
import { flag, stealthSwitches, type StealthSwitches } from '../core/flags.ts';
import { cdpEvaluate, layoutScrollY } from '../core/pages.ts';
import { optInt, optStr, profileDir, type Body } from '../core/validate.ts';
import type { OpResult, PlaneFactory, PlaneSessionImpl, SessionInitRequest } from '../core/types.ts';
import { sessionEgress, type EgressProxy } from '../core/egress-proxy.ts';
import { WarmPool } from '../core/pool.ts';
import { browserUser } from '../core/browser-user.ts';
import { Recording, recordingEnabled, recordingFps, recordingSize } from '../core/recording.ts';
import { Grabber, type ImageFormat } from './grabber.ts';
import { startXvfb, type Display } from './xvfb.ts';
import { XInput, type XdotoolResult } from './xinput.ts';
import { applyStealth } from './stealth.ts';
import { geoFor, geoLaunch, sameGeo, type Geo } from '../core/geo.ts';
import { jitterPath, settleDelayMs } from './jitter.ts';
import { LostSignal } from '../core/lost.ts';
import { PageFactsTracker } from './page-facts.ts';
import { DOWNLOAD_ROUTES, downloadDirFor, downloadOps, prepareDownloadDir, removeDownloadDir } from '../core/downloads.ts';
import { CDP_ACTIVITY_ROUTES, CdpActivity, cdpActivityOps } from '../core/cdp-activity.ts';
import { LIVE_ROUTES, liveOps, type LiveInput } from '../core/live.ts';
import { primeRoot } from '../core/cdp-relay.ts';
import { ComputerLiveScreen } from './live.ts';
import { DisplayKeymap } from './keymap.ts';
import { DisplayTyper, typeOfArgv } from './typer.ts';
const ROUTES = { screenshot: 'POST', xdotool: 'POST', cdp: 'POST', ...DOWNLOAD_ROUTES, ...CDP_ACTIVITY_ROUTES, ...LIVE_ROUTES } as const;

function parseFormat(b: Body): ImageFormat {
  const f = optStr(b, 'format') ?? 'png';
  if (f !== 'png' && f !== 'jpeg' && f !== 'webp') throw badRequest('format must be png, jpeg or webp');
  return f;
}

function parseArgv(b: Body): string[] {
  const v = b.argv;
  if (!Array.isArray(v) || v.length === 0 || v.length > 256 || !v.every((a) => typeof a === 'string' && a.length <= 4096 && !a.includes('\0'))) {
    throw badRequest('argv must be a non-empty array of at most 256 strings');
  }
  return v as string[];
}

/** A display with its input and capture channels: no tenant state, so it can be pooled. */
interface Screen {
  display: Display;
  input: XInput;
  grabber: Grabber;
}

/**
 * A display with its input and capture. `capture: false` for a pooled one: its
 * grabber (an ffmpeg x11grab at PLANE_GRAB_FPS, 2.6 MB a frame piped to this
 * process) starts when a session takes the display, not while it waits: an
 * idle warm agent cost 0.13 of a core here, for nothing.
 */
async function openScreen([width, height]: [number, number], capture = true): Promise<Screen> {
  const display = await startXvfb(width, height, browserUser());
  const grabber = new Grabber(display.name, width, height, Number(process.env.PLANE_GRAB_FPS || 15), display.env);
  if (capture) grabber.start();
  return { display, input: new XInput(display.env), grabber };
}

async function closeScreen(s: Screen | undefined): Promise<void> {
  if (!s) return;
  await s.grabber.stop();
  await s.input.close();
  await s.display.stop();
}


async function launchOn(screen: Screen, viewport: [number, number], userDataDir: string, egress: EgressProxy, home: string, flags: string[], geo: Geo | undefined, sw: StealthSwitches): Promise<Browser> {
  const g = geoLaunch(geo);
  const env: Record<string, string> = { ...screen.display.env, ...g.env };
  const extra = [...flags, ...g.flags];
  // Never --enable-automation here, stealth or not: its infobar would sit in every
  // screenshot the brain sees. (Chromium driven over --remote-debugging-pipe still sets
  // navigator.webdriver, which the stealth patch hides.)
  const browser = await launchChromium({ userDataDir, headless: false, viewport, egress, home, extraFlags: extra, env, hideAutomation: true });
  try {
    if (sw.cdp_stealth) await applyStealth(browser, sw.honest_mode);
  } catch (err) {
    await closeChromium(browser);
    throw err;
  }
  return browser;
}


// Warm pool: displays (with input and capture) at the default viewport, each with a
// fresh browser on a throwaway profile for sessions that ask for no persisted profile.
interface WarmItem {
  screen: Screen;
  launched: Launched | undefined;
}
const POOL_VIEWPORT: [number, number] = [1280, 720];
let pool: WarmPool<WarmItem> | undefined;

async function makeWarm(): Promise<WarmItem> {
  const screen = await openScreen(POOL_VIEWPORT, false);
  try {
    const sw = stealthSwitches();
    const launched = await withEgress(undefined, undefined, (dir, egress, home) => launchOn(screen, POOL_VIEWPORT, dir, egress, home, [], sw.geo_consistency ? geoFor({ proxy_server: null }) : undefined, sw));
    // the launch tab's page attached now (puppeteer keeps it): the session's page facts find it
    // ready instead of attaching it on the session's start (their start, p50 ~100 -> ~80 ms at load 21)
    await launched.browser.pages().catch(async (err: unknown) => {
      await closeLaunched(launched);
      throw err;
    });
    return { screen, launched };
  } catch (err) {
    await closeScreen(screen);
    throw err;
  }
}

async function disposeWarm(w: WarmItem): Promise<void> {
  await closeLaunched(w.launched);
  await closeScreen(w.screen);
}

async function startComputer(init: SessionInitRequest, dataDir: string): Promise<PlaneSessionImpl> {
  const switches = stealthSwitches();
  const [width, height] = init.viewport;
  const geo = switches.geo_consistency ? geoFor(init) : undefined;
  const samePool = init.viewport[0] === POOL_VIEWPORT[0] && init.viewport[1] === POOL_VIEWPORT[1];
  let warm = samePool ? pool?.take() : undefined;
  // A pooled display (or browser) that died while it waited is discarded.
  if (warm && warm.screen.display.child.exitCode !== null) {
    await disposeWarm(warm);
    warm = undefined;
  }
  let screen: Screen | undefined = warm?.screen;
  let launched: Launched | undefined;
  let recording: Recording | undefined;
  const downloadDir = prepareDownloadDir(downloadDirFor(dataDir, init.tenant_id, init.run_id), browserUser());
  const activity = new CdpActivity();
  const teardown = async (): Promise<void> => {
    await recording?.stop();
    await closeLaunched(launched);
    await closeScreen(screen);
    await removeDownloadDir(downloadDir);
  };
  try {
    // The pooled browser fits only a session that wants a throwaway profile, no extra
    // flags and the geo it was started with; otherwise it is discarded unused.
    const fits = warm?.launched?.browser.connected && !init.persist_profile && init.chrome_flags.length === 0 && sameGeo(geo, switches.geo_consistency ? geoFor({ proxy_server: null }) : undefined);
    if (warm?.launched && fits) {
      launched = warm.launched;
      launched.egress.configure(sessionEgress(init));
    } else {
      await closeLaunched(warm?.launched);
    }
    screen ??= await openScreen(init.viewport);
    // a pooled display's capture starts with its session
    screen.grabber.start();
    if (!launched) {
      const userDataDir = init.persist_profile ? profileDir(dataDir, init.tenant_id, init.profile_id) : undefined;
      const on = screen;
      launched = await withEgress(init, userDataDir, (dir, egress, home) => launchOn(on, init.viewport, dir, egress, home, init.chrome_flags, geo, switches));
    }
    if (recordingEnabled()) {
      const fps = String(recordingFps());
      // the display is grabbed whole and scaled before encoding: VP8's cost goes with the pixels it encodes
      const [vw, vh] = recordingSize([width, height]);
      const scale = vw === width && vh === height ? [] : ['-vf', `scale=${vw}:${vh}:flags=bilinear`];
      recording = new Recording(
        recordingPath(dataDir, init.tenant_id, init.run_id),
        ['-f', 'x11grab', '-draw_mouse', '1', '-framerate', fps, '-video_size', `${width}x${height}`, '-i', `${screen.display.name}.0+0,0`, ...scale],
        false,
        screen.display.env,
      );
    }
  } catch (err) {
    await teardown();
    throw err;
  }
  const b = launched.browser;
  const g = screen.grabber;
  const x = screen.input;
  const d = screen.display;
  const egress = launched.egress;
  const jitter = switches.behavioral_jitter;
  // The session is lost when its browser or its display goes: xdotool on a bare X
  // server would "succeed" against nothing.
  const lost = new LostSignal();
  lost.watchBrowser(b);
  lost.watchProcess(d.child, "the session's display (Xvfb)");
  // PLANE_PAGE_FACTS=0 turns them off (bench/planes measures their cost)
  const facts = flag(process.env.PLANE_PAGE_FACTS, true) ? new PageFactsTracker(b, egress) : undefined;
  try {
    await facts?.start();
  } catch (err) {
    await teardown();
    throw err;
  }
  // The tab on screen, chosen without asking the pages (a visibilityState read would run script in each)
  const shownPage = async () => facts?.activePage() ?? (await b.pages()).at(-1);
  // one typer per display: the run's typing and a person's paste never rebind each other's keys
  const typer = new DisplayTyper(x, new DisplayKeymap(d.env));
  const live = new ComputerLiveScreen(g, x, facts, typer);
  // `page_text: true` on a request adds the rendered text (the hints' expect_text_present, anti-bot markers)
  // a screenshot's facts say where on it the page is drawn (the runner judges "the page changed" there)
  const pageFacts = async (body?: Body, shot?: { width: number; height: number }) => {
    if (!facts) return {};
    const [page, text] = await Promise.all([facts.snapshot({ content: shot }).catch(() => null), body?.page_text === true ? facts.text().catch(() => null) : undefined]);
    return { page: page && text !== undefined ? { ...page, text } : page };
  };
  /**
   * When the last input finished: a screenshot shows a frame captured after it. A pooled
   * browser has long been on screen, so any frame will do; a cold one must be painted.
   */
  let lastInputAt = launched === warm?.launched ? 0 : Date.now();
  
  const ops = {
    screenshot: {
      http: 'POST' as const,
      idempotent: false,
      async run(body: Body): Promise<OpResult> {
        const format = parseFormat(body);
        const [frame, sy] = await Promise.all([g.frame(lastInputAt), shownPage().then(layoutScrollY)]);
        const image = await g.encode(frame, format);
        return { body: { width: g.width, height: g.height, scroll_y: sy, captured_at_ms: frame.at, format, ...(await pageFacts(body, g)) }, blob: image };
      },
    },
    xdotool: {
      http: 'POST' as const,
      idempotent: true,
      async run(body: Body): Promise<OpResult> {
        const argv = parseArgv(body);
        const timeout = optInt(body, 'timeout_ms', 1, 120_000) ?? 5000;
        // text beyond the display's keyboard (é, ✓, 中) is bound to keys before it is typed (typer.ts)
        const typed = typeOfArgv(argv);
        const r = typed ? await typer.type(typed.text, typed.options, timeout) : jitter ? await humanized(x, argv, timeout) : await x.run(argv, timeout);
        lastInputAt = Date.now();
        return { body: { ...r, ...(await pageFacts(body)) } };
      },
    },
    cdp: {
      http: 'POST' as const,
      idempotent: true,
      async run(body: Body): Promise<OpResult> {
        if (!init.enable_cdp) throw forbidden('CDP is disabled for this session (enable_cdp was not set at init)');
        const r = await cdpEvaluate(await shownPage(), body);
        lastInputAt = Date.now();
        return { body: r };
      },
    },
    ...downloadOps(downloadDir),
    ...cdpActivityOps(activity),
    // a person's inputs count in the session's trace as a CDP client's do; a screenshot after one shows its effect
    ...liveOps(live, (i: LiveInput) => {
      lastInputAt = Date.now();
      if (!(i.type === 'mouse' && i.action === 'move')) activity.note(`Input.live.${i.type}`, {});
    }),
  };
  const endpoint = launched.endpoint;
  const root = init.enable_cdp ? primeRoot(endpoint()) : undefined;
  return {
    chromePid: b.process()?.pid ?? null,
    display: d.name,
    capabilities: { dom_aware: false, stealth: true, supports_cdp: init.enable_cdp, backend: 'computer_plane' },
    ops,
    warm: warm !== undefined,
    recordingFile: recording?.file,
    setProxy: (proxyServer) => egress.configure(sessionEgress({ ...init, proxy_server: proxyServer })),
    health: () => ({ egress: egress.status(), recording: recording !== undefined, ...(facts ? { page: facts.cached() } : {}) }),
    lost,
    downloadDir,
    cdpActivity: activity,
    // the browser is the session's alone (a pooled one is taken, never given back)
    cdpEndpoint: () => (init.enable_cdp ? endpoint() : Promise.reject(forbidden('CDP is disabled for this session (enable_cdp was not set at init)'))),
    ...(root ? { cdpSocket: () => root.take() } : {}),
    close: async () => {
      root?.close();
      lost.closingNow();
      live.stop();
      await facts?.close();
      await teardown();
    },
  };
}

const isCoord = (v: string | undefined) => v !== undefined && /^\d{1,5}$/.test(v);

/**
 * Behavioural jitter (SERVICE_BEHAVIORAL_JITTER) for every pointer action, not
 * only a bare mousemove: each absolute `mousemove X Y` in the command chain
 * (a click, a double or right click, a drag, a scroll at a point) travels a
 * curved path from where the pointer is, and the command after it waits a
 * settle delay, as a hand lands before it clicks. Other commands run as given.
 */
async function humanized(x: XInput, argv: string[], timeout: number): Promise<XdotoolResult> {
  let last: XdotoolResult | undefined;
  let i = 0;
  while (i < argv.length) {
    if (argv[i] === 'mousemove' && isCoord(argv[i + 1]) && isCoord(argv[i + 2])) {
      const [tx, ty] = [Number(argv[i + 1]), Number(argv[i + 2])];
      const cur = /X=(\d+)\s+Y=(\d+)/.exec((await x.run(['getmouselocation', '--shell'], timeout)).stdout);
      // a hand takes its time: the browser coalesces moves within a frame, so points a few ms apart would land as one
      if (cur) {
        for (const [px, py] of jitterPath([Number(cur[1]), Number(cur[2])], [tx, ty])) {
          await x.run(['mousemove', String(px), String(py)], timeout);
          await new Promise((r) => setTimeout(r, 10 + Math.random() * 8));
        }
      }
      last = await x.run(['mousemove', String(tx), String(ty)], timeout);
      if (last.returncode !== 0) return last;
      i += 3;
      if (i < argv.length) await new Promise((r) => setTimeout(r, settleDelayMs(SETTLE_BASE_MS)));
      continue;
    }
    // the commands up to the next absolute move run as one chain
    let j = i + 1;
    while (j < argv.length && !(argv[j] === 'mousemove' && isCoord(argv[j + 1]) && isCoord(argv[j + 2]))) j++;
    last = await x.run(argv.slice(i, j), timeout);
    if (last.returncode !== 0) return last;
    i = j;
  }
  return last ?? (await x.run(argv, timeout));
}

/** The base of the settle delay before a click lands (jittered to [base/2, base + 600] ms by settleDelayMs). */
const SETTLE_BASE_MS = 80;

export const computerPlane: PlaneFactory = {
  backend: 'computer_plane',
  domAware: false,
  routes: ROUTES,
  start: startComputer,
  startPool(size, log) {
    pool ??= new WarmPool(size, makeWarm, disposeWarm, log);
    pool.fill();
  },
  async stopPool() {
    await pool?.close();
    pool = undefined;
  },
  poolReady: () => pool?.readyCount ?? 0,
  poolCapacity: () => pool?.size ?? 0,
};
