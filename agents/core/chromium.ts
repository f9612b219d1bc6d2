// Launching the system Chromium through puppeteer-core for both planes. The flags keep
// it off the network it would otherwise call home to (closed network here).
import { mkdirSync, mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser } from 'puppeteer-core';
import { killGroup, stopChild, waitGroupGone } from './procs.ts';
import { sessionEgress, startEgress, type EgressProxy, type EgressSettings } from './egress-proxy.ts';

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
  /** The session's egress guard: every request of the browser goes through it. */
  egress: EgressProxy;
  extraFlags: readonly string[];
  env?: NodeJS.ProcessEnv;
  /** Drop the automation flag that shows an infobar and sets navigator.webdriver. */
  hideAutomation?: boolean;
}

export async function launchChromium(o: LaunchOptions): Promise<Browser> {
  mkdirSync(o.userDataDir, { recursive: true });
  const [w, h] = o.viewport;
  const args = [...QUIET_FLAGS, `--window-size=${w},${h}`, '--window-position=0,0'];
  args.push(...o.egress.chromeFlags());
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

/** A fresh user-data dir for a session that asked for no persisted profile (or a pooled browser). */
export function throwawayProfile(): string {
  return mkdtempSync(join(tmpdir(), 'runplane-profile-'));
}

export async function removeProfile(dir: string | undefined): Promise<void> {
  if (dir) await rm(dir, { recursive: true, force: true }).catch(() => undefined);
}

/** Where a session's recording goes: tenant-prefixed under the data dir. */
export function recordingPath(dataDir: string, tenantId: string, runId: string): string {
  return join(dataDir, 'recordings', tenantId, `${runId}-${Date.now()}.webm`);
}

/** A session's browser with the egress guard it is launched behind. */
export interface Launched {
  browser: Browser;
  egress: EgressProxy;
  /** Set for a throwaway profile, removed on close. */
  tmpProfile: string | undefined;
}

/**
 * Starts a guard (configured for `init`, or unconfigured for a pooled browser) and
 * launches a browser behind it on `userDataDir`, or on a throwaway profile when that
 * is undefined; nothing is left running when the launch fails.
 */
export async function withEgress(
  init: { allow_private_networks: boolean; proxy_server: string | null } | undefined,
  userDataDir: string | undefined,
  launch: (dir: string, egress: EgressProxy) => Promise<Browser>,
): Promise<Launched> {
  const settings: EgressSettings | undefined = init ? sessionEgress(init) : undefined;
  const egress = await startEgress(settings);
  const tmpProfile = userDataDir ? undefined : throwawayProfile();
  try {
    return { browser: await launch(userDataDir ?? (tmpProfile as string), egress), egress, tmpProfile };
  } catch (err) {
    await egress.stop();
    await removeProfile(tmpProfile);
    throw err;
  }
}

export async function closeLaunched(l: Launched | undefined): Promise<void> {
  if (!l) return;
  await closeChromium(l.browser);
  await l.egress.stop();
  await removeProfile(l.tmpProfile);
}
