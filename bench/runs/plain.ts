// The baseline bench/runs compares against: the same plans written as a plain
// puppeteer-core script on the same system Chromium, as a user could write it
// without the service. No recording, no trace, no egress guard, no records. It runs
// on the browser the gateway's dom_plane runs on (PLANE_DOM_BROWSER). With `shots`
// it also takes a PNG screenshot after each step, as the gateway's default capture
// (model_io) does for the trace: the like-for-like baseline for a step's cost.
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FORM_FINAL, type PlanName } from './plan.ts';
import { CHROMIUM_PATH, HEADLESS_SHELL_PATH, QUIET_FLAGS, headlessBrowser } from '../../agents/core/chromium.ts';

const SHELL = headlessBrowser() === 'headless-shell';
const ARGS = ['--no-sandbox', '--window-size=1280,720', ...QUIET_FLAGS];

/** The bench plan by hand: open the listings, extract, paginate twice (extracting), open the counter, 12 clicks, read the URL: 20 steps. */
export async function plainPlan(page: Page, site: string, shots = false): Promise<number> {
  const step = async <T>(done: Promise<T>): Promise<T> => {
    const out = await done;
    if (shots) await page.screenshot({ type: 'png', optimizeForSpeed: true });
    return out;
  };
  const cards = () => step(page.$$eval('.card', (els) => els.map((e) => ({ title: e.querySelector('h2')?.textContent ?? '', price: Number.parseFloat(e.querySelector('.price')?.textContent ?? '') }))));
  let rows = 0;
  await step(page.goto(`${site}/list?page=1`, { waitUntil: 'load' }));
  rows += (await cards()).length;
  for (let i = 0; i < 2; i++) {
    await step(Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('nav a')]));
    rows += (await cards()).length;
  }
  await step(page.goto(`${site}/counter`, { waitUntil: 'load' }));
  for (let i = 0; i < 12; i++) await step(Promise.all([page.waitForResponse((r) => r.url().endsWith('/hit')), page.click('#hit')]));
  const url = await step(Promise.resolve(page.url()));
  if (!url.endsWith('/counter')) throw new Error(`plain script ended on ${url}`);
  return rows;
}

/** The form plan by hand: open the order form, four rounds of two fills (select all, type), a typed note and a dropdown choice, submit, read the URL and the email back: 20 steps. */
export async function plainFormPlan(page: Page, site: string, shots = false): Promise<number> {
  const step = async <T>(done: Promise<T>): Promise<T> => {
    const out = await done;
    if (shots) await page.screenshot({ type: 'png', optimizeForSpeed: true });
    return out;
  };
  const fill = async (sel: string, value: string) => {
    await page.click(sel, { count: 3 });
    await page.keyboard.press('Backspace');
    await page.type(sel, value);
  };
  const sizes = ['s', 'm', 'l', 'l'];
  await step(page.goto(`${site}/order`, { waitUntil: 'load' }));
  for (let i = 1; i <= 4; i++) {
    await step(fill('#email', `ada${i}@example.com`));
    await step(fill('#name', `Ada Lovelace ${i}`));
    await step(page.type('#note', ` note ${i}`));
    await step(page.select('#size', sizes[i - 1]!));
  }
  await step(Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('button[type=submit]')]));
  const url = await step(Promise.resolve(page.url()));
  const email = await step(page.$eval('#email', (e) => e.textContent ?? ''));
  if (!url.includes('name=Ada+Lovelace+4') || email !== FORM_FINAL.email) throw new Error(`plain form script ended on ${url} with ${email}`);
  return 1;
}

/** The named plan by hand. */
export function plainByName(name: PlanName): (page: Page, site: string, shots?: boolean) => Promise<number> {
  return name === 'form' ? plainFormPlan : plainPlan;
}

async function launch(): Promise<{ browser: Browser; dir: string }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'runplane-bench-plain-'));
  const browser = await puppeteer.launch({ executablePath: SHELL ? HEADLESS_SHELL_PATH : CHROMIUM_PATH, headless: SHELL ? 'shell' : true, args: ARGS, userDataDir: dir, defaultViewport: { width: 1280, height: 720 } });
  return { browser, dir };
}

/** One run with its own browser, launched and closed (the single-run wall time baseline). */
export async function plainRunOwnBrowser(site: string, shots = false, name: PlanName = 'click'): Promise<number> {
  const t0 = performance.now();
  const { browser, dir } = await launch();
  try {
    await plainByName(name)(await browser.newPage(), site, shots);
  } finally {
    await browser.close();
    await rm(dir, { recursive: true, force: true });
  }
  return performance.now() - t0;
}

/** One browser shared by runs, each in a fresh incognito context (the throughput baseline). */
export async function sharedBrowser(shots = false, name: PlanName = 'click'): Promise<{ run(site: string): Promise<number>; close(): Promise<void> }> {
  const { browser, dir } = await launch();
  return {
    async run(site) {
      const t0 = performance.now();
      const ctx = await browser.createBrowserContext();
      try {
        await plainByName(name)(await ctx.newPage(), site, shots);
      } finally {
        await ctx.close();
      }
      return performance.now() - t0;
    },
    async close() {
      await browser.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
