// Launching the system Chromium through puppeteer-core for both planes, with its
// sandbox on (as the unprivileged browser user when the agent is root, see
// browser-user.ts). The flags keep it off the network it would otherwise call home to
// (closed network here).
import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Browser } from 'puppeteer-core';
import { killGroup, stopChild, waitGroupGone } from './procs.ts';
import { sessionEgress, startEgress, type EgressProxy, type EgressSettings } from './egress-proxy.ts';
import { SANDBOX_OFF_FLAGS } from './validate.ts';
import { asBrowserUser, browserEnv, browserUser, preparePersistedProfile, privateTempDir, type BrowserUser } from './browser-user.ts';

// puppeteer-core is most of what an agent would load before it listens (~0.5 s):
// it is loaded with the first browser instead
type Puppeteer = Pick<typeof import('puppeteer-core'), 'launch' | 'defaultArgs'>;
let puppeteerLoad: Promise<Puppeteer> | undefined;
const puppeteer = (): Promise<Puppeteer> => {
  // puppeteer makes a `debug` logger for every CDP message, and each asked isatty() of stderr
  // unless DEBUG_COLORS is set: 2-3% of a dom agent's CPU (read when `debug` loads, with puppeteer)
  process.env.DEBUG_COLORS ??= 'false';
  return (puppeteerLoad ??= import('puppeteer-core'));
};

export const CHROMIUM_PATH = process.env.PLANE_CHROMIUM_PATH || '/usr/bin/chromium';
/** The binary itself: Debian's /usr/bin wrapper runs it as a child of a shell (it does not exec), which would be the pid we stop. */
export const HEADLESS_SHELL_PATH = process.env.PLANE_HEADLESS_SHELL_PATH || '/usr/lib/chromium/chromium-headless-shell';

/**
 * dom_plane's browser (PLANE_DOM_BROWSER). `chromium`, the default: the full browser in
 * its new headless mode, the one the stealth patches and the fingerprint page are tuned
 * on. `headless-shell`: Debian's chromium-headless-shell, the same Chromium built
 * headless-only (what Playwright and puppeteer's `headless: 'shell'` run): a tab costs a
 * fraction of the CPU, but a page can tell it is headless (HeadlessChrome brand, no
 * plugins, no window.chrome; docs/decisions.md).
 */
export type HeadlessBrowser = 'chromium' | 'headless-shell';

export function headlessBrowser(env: NodeJS.ProcessEnv = process.env, shellPath = HEADLESS_SHELL_PATH): HeadlessBrowser {
  const v = (env.PLANE_DOM_BROWSER ?? '').trim().toLowerCase() || 'chromium';
  if (v !== 'chromium' && v !== 'headless-shell') throw new Error(`PLANE_DOM_BROWSER must be chromium or headless-shell, got ${JSON.stringify(env.PLANE_DOM_BROWSER)}`);
  if (v === 'headless-shell' && !existsSync(shellPath)) {
    throw new Error(`PLANE_DOM_BROWSER=headless-shell needs ${shellPath} (Debian's chromium-headless-shell package, which scripts/ensure-system-deps.sh installs)`);
  }
  return v;
}

export const QUIET_FLAGS = [
  '--disable-background-networking',
  '--disable-component-update',
  '--no-first-run',
  '--disable-sync',
  '--disable-default-apps',
  '--no-default-browser-check',
  '--disable-dev-shm-usage',
  '--password-store=basic',
  '--use-mock-keychain',
  // Chromium 156 preloads its omnibox popup as a WebUI page (a renderer of its own) for
  // every window, and a browser context is a window: 1.8 of the 2.9 CPU-s a fresh context,
  // tab and first page cost on a dom_plane browser (decisions.md). No page can see it;
  // the omnibox falls back to its native popup. puppeteer merges this with its own list.
  '--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup',
];

export interface LaunchOptions {
  userDataDir: string;
  /** `shell`: chromium-headless-shell (PLANE_DOM_BROWSER=headless-shell) */
  headless: boolean | 'shell';
  viewport: [number, number];
  /** The session's egress guard: every request of the browser goes through it. */
  egress: EgressProxy;
  extraFlags: readonly string[];
  /** The browser's private home and temp dir (see withEgress). */
  home: string;
  /** Added to the browser's minimal environment (DISPLAY, XAUTHORITY, TZ, LANG ...). */
  env?: Record<string, string>;
  /**
   * Leave out --enable-automation: on a headful browser it shows the infobar "controlled
   * by automated test software" (and it sets navigator.webdriver).
   */
  hideAutomation?: boolean;
}

/** Chromium's command line: puppeteer's defaults and ours, never a sandbox-off flag. */
export async function chromiumArgs(o: Pick<LaunchOptions, 'userDataDir' | 'headless' | 'viewport' | 'egress' | 'extraFlags' | 'hideAutomation'>): Promise<string[]> {
  const [w, h] = o.viewport;
  // the pipe drives the browser; the port (127.0.0.1, a free one) is what a session's CDP
  // clients reach through the agent's relay (cdp-relay.ts). puppeteer adds neither once one
  // --remote-debugging- flag is present, so both are ours.
  const ours = [...QUIET_FLAGS, `--window-size=${w},${h}`, '--window-position=0,0', ...o.egress.chromeFlags(), '--remote-debugging-pipe', '--remote-debugging-port=0', ...o.extraFlags];
  return (await puppeteer())
    .defaultArgs({ headless: o.headless, userDataDir: o.userDataDir, args: ours })
    .filter((a) => !SANDBOX_OFF_FLAGS.test(a) && !(o.hideAutomation && a === '--enable-automation'));
}

export async function launchChromium(o: LaunchOptions, user: BrowserUser | undefined = browserUser()): Promise<Browser> {
  const [w, h] = o.viewport;
  const { command, prefix } = asBrowserUser(o.headless === 'shell' ? HEADLESS_SHELL_PATH : CHROMIUM_PATH, user);
  const args = [...prefix, ...(await chromiumArgs(o))];
  return (await puppeteer()).launch({
    executablePath: command,
    headless: o.headless,
    pipe: true,
    userDataDir: o.userDataDir,
    // All arguments are ours (ignoreDefaultArgs: true): the setpriv prefix first, then
    // Chromium's (the --remote-debugging- flags included: see chromiumArgs).
    ignoreDefaultArgs: true,
    args,
    env: browserEnv(o.home, o.env ?? {}),
    defaultViewport: o.headless ? { width: w, height: h } : null,
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

/** Where Chromium writes its debugging port (line 1) and browser ws path (line 2) once it listens. */
export const DEVTOOLS_PORT_FILE = 'DevToolsActivePort';

/**
 * The browser's debugging endpoint, ws://127.0.0.1:<port><path>, read from its
 * DevToolsActivePort (written at start, as a rule before the pipe answers; waited for, up to 15 s on a loaded host).
 */
export async function devToolsEndpoint(userDataDir: string, waitMs = 15_000): Promise<{ port: number; url: string }> {
  const until = Date.now() + waitMs;
  for (;;) {
    const text = await readFile(join(userDataDir, DEVTOOLS_PORT_FILE), 'utf8').catch(() => '');
    const [portLine, path] = text.split('\n');
    const port = Number(portLine);
    if (Number.isInteger(port) && port > 0 && path?.startsWith('/devtools/browser/')) return { port, url: `ws://127.0.0.1:${port}${path.trim()}` };
    if (Date.now() > until) throw new Error('the browser did not write its DevToolsActivePort');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A fresh user-data dir for a session that asked for no persisted profile (or a pooled browser). */
export function throwawayProfile(user: BrowserUser | undefined = browserUser()): string {
  return privateTempDir('runplane-profile-', user);
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
  /** The browser's private home and temp dir, removed on close. */
  home: string;
  /** The browser's user-data dir (its DevToolsActivePort is there). */
  userDataDir: string;
  /** The browser's debugging endpoint (ws://127.0.0.1:<port>/devtools/browser/<id>), read once. */
  endpoint(): Promise<string>;
}

/**
 * Starts a guard (configured for `init`, or unconfigured for a pooled browser) and
 * launches a browser behind it on `userDataDir`, or on a throwaway profile when that
 * is undefined; nothing is left running when the launch fails.
 */
export async function withEgress(
  init: { allow_private_networks: boolean; proxy_server: string | null; allowed_domains?: readonly string[] } | undefined,
  userDataDir: string | undefined,
  launch: (dir: string, egress: EgressProxy, home: string) => Promise<Browser>,
): Promise<Launched> {
  // Throws before anything starts when the agent is root without a browser user.
  const user = browserUser();
  const settings: EgressSettings | undefined = init ? sessionEgress(init) : undefined;
  const egress = await startEgress(settings);
  let tmpProfile: string | undefined;
  let home: string | undefined;
  try {
    if (userDataDir) preparePersistedProfile(userDataDir, user);
    else tmpProfile = throwawayProfile(user);
    home = privateTempDir('runplane-home-', user);
    const dir = userDataDir ?? (tmpProfile as string);
    // a persisted profile keeps the file of its last browser: its port would be read before the new one writes its own
    await rm(join(dir, DEVTOOLS_PORT_FILE), { force: true });
    const browser = await launch(dir, egress, home);
    const ep = devToolsEndpoint(dir);
    ep.catch(() => undefined);
    // a page must not reach the debugging port, even where private networks are allowed
    egress.protectLoopbackPort(ep.then((e) => e.port));
    return { browser, egress, tmpProfile, home, userDataDir: dir, endpoint: () => ep.then((e) => e.url) };
  } catch (err) {
    await egress.stop();
    await removeProfile(tmpProfile);
    await removeProfile(home);
    throw err;
  }
}

export async function closeLaunched(l: Launched | undefined): Promise<void> {
  if (!l) return;
  await closeChromium(l.browser);
  await l.egress.stop();
  await removeProfile(l.tmpProfile);
  await removeProfile(l.home);
}
