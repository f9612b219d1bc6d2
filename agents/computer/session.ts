// computer_plane: Xvfb + headful Chromium + xdotool. The brain sees pixels only; input
// goes through xdotool on the session's own display.
import type { Browser } from 'puppeteer-core';
import { closeChromium, launchChromium } from '../core/chromium.ts';
import { badRequest, forbidden } from '../core/errors.ts';
import { stealthSwitches } from '../core/flags.ts';
import { cdpEvaluate, scrollY, visiblePage } from '../core/pages.ts';
import { optInt, optStr, profileDir, type Body } from '../core/validate.ts';
import type { OpResult, PlaneFactory, PlaneSessionImpl, SessionInitRequest } from '../core/types.ts';
import { Grabber, type ImageFormat } from './grabber.ts';
import { startXvfb, type Display } from './xvfb.ts';
import { XInput } from './xinput.ts';
import { applyStealth } from './stealth.ts';
import { geoFor } from './geo.ts';
import { jitterPath } from './jitter.ts';

const ROUTES = { screenshot: 'POST', xdotool: 'POST', cdp: 'POST' } as const;

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

async function startComputer(init: SessionInitRequest, dataDir: string): Promise<PlaneSessionImpl> {
  const switches = stealthSwitches();
  const [width, height] = init.viewport;
  const userDataDir = profileDir(dataDir, init.tenant_id, init.profile_id);
  let display: Display | undefined;
  let input: XInput | undefined;
  let grabber: Grabber | undefined;
  let browser: Browser | undefined;
  const teardown = async (): Promise<void> => {
    await closeChromium(browser);
    await grabber?.stop();
    await input?.close();
    await display?.stop();
  };
  try {
    display = await startXvfb(width, height);
    input = new XInput(display.name);
    const geo = switches.geo_consistency ? geoFor(init.proxy_server) : undefined;
    const env: NodeJS.ProcessEnv = { ...process.env, DISPLAY: display.name };
    if (geo) Object.assign(env, { TZ: geo.tz, LANG: `${geo.locale.replace('-', '_')}.UTF-8`, LANGUAGE: geo.locale });
    const extra = [...init.chrome_flags];
    if (geo) extra.push(`--lang=${geo.locale}`);
    browser = await launchChromium({
      userDataDir,
      headless: false,
      viewport: init.viewport,
      proxyServer: init.proxy_server,
      extraFlags: extra,
      env,
      hideAutomation: switches.cdp_stealth,
    });
    if (switches.cdp_stealth) await applyStealth(browser, switches.honest_mode);
    grabber = new Grabber(display.name, width, height, Number(process.env.PLANE_GRAB_FPS || 15));
    grabber.start();
  } catch (err) {
    await teardown();
    throw err;
  }
  const b = browser;
  const g = grabber;
  const x = input;
  const d = display;
  const jitter = switches.behavioral_jitter;

  const ops = {
    screenshot: {
      http: 'POST' as const,
      idempotent: false,
      async run(body: Body): Promise<OpResult> {
        const format = parseFormat(body);
        const asked = Date.now();
        const [frame, sy] = await Promise.all([g.frame(asked), visiblePage(b).then(scrollY)]);
        const image = await g.encode(frame, format);
        return { body: { width: g.width, height: g.height, scroll_y: sy, captured_at_ms: frame.at, format }, blob: image };
      },
    },
    xdotool: {
      http: 'POST' as const,
      idempotent: true,
      async run(body: Body): Promise<OpResult> {
        const argv = parseArgv(body);
        const timeout = optInt(body, 'timeout_ms', 1, 120_000) ?? 5000;
        // Jitter: an absolute mousemove travels a curved path instead of teleporting.
        if (jitter && argv[0] === 'mousemove' && argv.length === 3) {
          const loc = await x.run(['getmouselocation', '--shell'], timeout);
          const cur = /X=(\d+)\s+Y=(\d+)/.exec(loc.stdout);
          const tx = Number(argv[1]);
          const ty = Number(argv[2]);
          if (cur && Number.isFinite(tx) && Number.isFinite(ty)) {
            for (const [px, py] of jitterPath([Number(cur[1]), Number(cur[2])], [tx, ty])) {
              await x.run(['mousemove', String(px), String(py)], timeout);
            }
          }
        }
        const r = await x.run(argv, timeout);
        return { body: { ...r } };
      },
    },
    cdp: {
      http: 'POST' as const,
      idempotent: true,
      async run(body: Body): Promise<OpResult> {
        if (!init.enable_cdp) throw forbidden('CDP is disabled for this session (enable_cdp was not set at init)');
        return { body: await cdpEvaluate(await visiblePage(b), body) };
      },
    },
  };
  return {
    chromePid: b.process()?.pid ?? null,
    display: d.name,
    capabilities: { dom_aware: false, stealth: true, supports_cdp: init.enable_cdp, backend: 'computer_plane' },
    ops,
    close: teardown,
  };
}

export const computerPlane: PlaneFactory = {
  backend: 'computer_plane',
  domAware: false,
  routes: ROUTES,
  start: startComputer,
};
