// Fingerprint patches applied before any page script runs (Page.addScriptToEvaluateOnNewDocument
// on every page target). Honest mode (default) only removes automation tells and keeps
// the real browser's identity; SERVICE_STEALTH_HONEST=0 adds the legacy deceptive spoofs.
import type { Browser, Page, Target } from 'puppeteer-core';

const HONEST = String.raw`(() => {
  const nativeToString = Function.prototype.toString;
  const fakes = new WeakMap();
  const asNative = (fn, name) => { fakes.set(fn, 'function ' + name + '() { [native code] }'); return fn; };
  const toString = asNative(function toString() { return fakes.has(this) ? fakes.get(this) : nativeToString.call(this); }, 'toString');
  Object.defineProperty(Function.prototype, 'toString', { value: toString, configurable: true, writable: true });
  Object.defineProperty(Navigator.prototype, 'webdriver', { get: asNative(function webdriver() { return undefined; }, 'get webdriver'), configurable: true });
  if (!navigator.languages || navigator.languages.length === 0) {
    const langs = Object.freeze([navigator.language || 'en-US', 'en']);
    Object.defineProperty(Navigator.prototype, 'languages', { get: asNative(function languages() { return langs; }, 'get languages'), configurable: true });
  }
  if (navigator.plugins.length === 0) {
    const names = ['PDF Viewer', 'Chrome PDF Viewer', 'Chromium PDF Viewer', 'Microsoft Edge PDF Viewer', 'WebKit built-in PDF'];
    const list = names.map((name) => ({ name, filename: 'internal-pdf-viewer', description: 'Portable Document Format', length: 1 }));
    const plugins = Object.create(PluginArray.prototype);
    list.forEach((p, i) => { plugins[i] = p; });
    Object.defineProperty(plugins, 'length', { value: list.length });
    plugins.item = asNative(function item(i) { return list[i] || null; }, 'item');
    plugins.namedItem = asNative(function namedItem(n) { return list.find((p) => p.name === n) || null; }, 'namedItem');
    Object.defineProperty(Navigator.prototype, 'plugins', { get: asNative(function plugins_() { return plugins; }, 'get plugins'), configurable: true });
  }
  if (typeof Permissions !== 'undefined') {
    const origQuery = Permissions.prototype.query;
    Permissions.prototype.query = asNative(function query(desc) {
      if (desc && desc.name === 'notifications') {
        const p = typeof Notification === 'undefined' ? 'default' : Notification.permission;
        return Promise.resolve({ name: 'notifications', state: p === 'default' ? 'prompt' : p, onchange: null });
      }
      return origQuery.call(this, desc);
    }, 'query');
  }
  if (!window.chrome) Object.defineProperty(window, 'chrome', { value: {}, writable: true, configurable: true });
  if (!window.chrome.runtime) {
    window.chrome.runtime = {
      OnInstalledReason: { CHROME_UPDATE: 'chrome_update', INSTALL: 'install', SHARED_MODULE_UPDATE: 'shared_module_update', UPDATE: 'update' },
      PlatformOs: { ANDROID: 'android', CROS: 'cros', LINUX: 'linux', MAC: 'mac', OPENBSD: 'openbsd', WIN: 'win' },
      connect: asNative(function connect() { return undefined; }, 'connect'),
      sendMessage: asNative(function sendMessage() { return undefined; }, 'sendMessage'),
    };
  }
  if (!window.chrome.app) {
    window.chrome.app = {
      isInstalled: false,
      InstallState: { DISABLED: 'disabled', INSTALLED: 'installed', NOT_INSTALLED: 'not_installed' },
      RunningState: { CANNOT_RUN: 'cannot_run', READY_TO_RUN: 'ready_to_run', RUNNING: 'running' },
      getDetails: asNative(function getDetails() { return null; }, 'getDetails'),
      getIsInstalled: asNative(function getIsInstalled() { return false; }, 'getIsInstalled'),
      runningState: asNative(function runningState() { return 'cannot_run'; }, 'runningState'),
    };
  }
  window.__runplaneStealth = 'honest';
})();`;

// Legacy deceptive set: present as a Windows desktop with a common GPU.
const DECEPTIVE = String.raw`(() => {
  Object.defineProperty(Navigator.prototype, 'platform', { get: () => 'Win32', configurable: true });
  Object.defineProperty(Navigator.prototype, 'hardwareConcurrency', { get: () => 8, configurable: true });
  const gp = WebGLRenderingContext.prototype.getParameter;
  WebGLRenderingContext.prototype.getParameter = function (p) {
    if (p === 37445) return 'Google Inc. (Intel)';
    if (p === 37446) return 'ANGLE (Intel, Intel(R) UHD Graphics 630 Direct3D11 vs_5_0 ps_5_0, D3D11)';
    return gp.call(this, p);
  };
  window.__runplaneStealth = 'deceptive';
})();`;

export function stealthScript(honest: boolean): string {
  return honest ? HONEST : `${HONEST}\n${DECEPTIVE}`;
}

/** The real user agent with "Headless" removed; the major version is kept as is. */
export function honestUserAgent(ua: string): string {
  return ua.replace(/HeadlessChrome/g, 'Chrome');
}

export async function applyStealth(browser: Browser, honest: boolean): Promise<void> {
  const script = stealthScript(honest);
  const realUa = honestUserAgent(await browser.userAgent());
  const ua = honest ? realUa : realUa.replace(/\(X11; Linux x86_64\)/, '(Windows NT 10.0; Win64; x64)');
  const patch = async (page: Page): Promise<void> => {
    await page.evaluateOnNewDocument(script);
    await page.setUserAgent(ua);
  };
  const onTarget = (t: Target): void => {
    if (t.type() !== 'page') return;
    void t.page().then((p) => (p ? patch(p) : undefined)).catch(() => undefined);
  };
  browser.on('targetcreated', onTarget);
  for (const p of await browser.pages()) {
    await patch(p);
    // The first tab exists before the patch: reload so it applies from the first script.
    if (p.url() !== 'about:blank') await p.reload().catch(() => undefined);
  }
}
