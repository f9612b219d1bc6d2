// Launching the system Chromium through puppeteer-core for both planes. The flags keep
// it off the network it would otherwise call home to (closed network here).
import { mkdirSync } from 'node:fs';
import puppeteer, { type Browser } from 'puppeteer-core';
import { killGroup, stopChild, waitGroupGone } from './procs.ts';

export const CHROMIUM_PATH = process.env.PLANE_CHROMIUM_PATH || '/usr/bin/chromium';

export const QUIET_FLAGS = [
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--no-first-run',
  '--disable-sync',
  '--disable-default-apps',
  '--no-default-browser-check',
  '--disable-dev-shm-usage',
  '--password-store=basic',
  '--use-mock-keychain',
];

export interface LaunchOptions {
  userDataDir: string;
  headless: boolean;
  viewport: [number, number];
  proxyServer: string | null;
  extraFlags: readonly string[];
  env?: NodeJS.ProcessEnv;
  /** Drop the automation flag that shows an infobar and sets navigator.webdriver. */
  hideAutomation?: boolean;
}

export async function launchChromium(o: LaunchOptions): Promise<Browser> {
  mkdirSync(o.userDataDir, { recursive: true });
  const [w, h] = o.viewport;
  const args = [...QUIET_FLAGS, `--window-size=${w},${h}`, '--window-position=0,0'];
  if (o.proxyServer) args.push(`--proxy-server=${o.proxyServer}`);
  args.push(...o.extraFlags);
  return puppeteer.launch({
    executablePath: CHROMIUM_PATH,
    headless: o.headless,
    pipe: true,
    userDataDir: o.userDataDir,
    args,
    env: o.env ?? process.env,
    defaultViewport: o.headless ? { width: w, height: h } : null,
    ignoreDefaultArgs: o.hideAutomation ? ['--enable-automation'] : [],
    handleSIGINT: false,
    handleSIGTERM: false,
    handleSIGHUP: false,
    protocolTimeout: 30_000,
  });
}

/** Close gracefully (flushes the profile), then sweep the browser's process group. */
export async function closeChromium(browser: Browser | undefined): Promise<void> {
  if (!browser) return;
  const proc = browser.process() ?? undefined;
  const pid = proc?.pid;
  await Promise.race([browser.close().catch(() => undefined), new Promise((r) => setTimeout(r, 5000).unref())]);
  await stopChild(proc, 'SIGKILL', 100);
  killGroup(pid);
  await waitGroupGone(pid);
}
