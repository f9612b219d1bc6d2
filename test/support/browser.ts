// A real browser for tests that drive a web page: Debian's Chromium through
// puppeteer-core, headless, with the flags that keep it off the network.
import { expect } from 'chai';
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';

/** Where the viewer tests leave their screenshots, for a person to look at. */
export const ARTIFACTS = path.join(tmpdir(), 'runplane-viewer-artifacts');

/** Saves a screenshot of the page and checks it shows something (not one flat colour). */
export async function snapshot(page: Page, name: string): Promise<void> {
  await mkdir(ARTIFACTS, { recursive: true });
  const file = path.join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path: file });
  const { channels } = await sharp(file).stats();
  expect(Math.max(...channels.map((c) => c.stdev)), `${name} is not blank`).to.be.above(10);
}

export async function launchTestBrowser(): Promise<Browser> {
  return puppeteer.launch({
    executablePath: process.env.PUPPETEER_EXECUTABLE_PATH ?? '/usr/bin/chromium',
    headless: true,
    defaultViewport: { width: 1280, height: 720 },
    args: [
      ...(process.getuid?.() === 0 ? ['--no-sandbox'] : []),
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
      '--disable-sync',
      '--disable-dev-shm-usage',
    ],
  });
}
