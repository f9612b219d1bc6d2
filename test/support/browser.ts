// A real browser for tests that drive a web page: Debian's Chromium through
// puppeteer-core, headless, with the flags that keep it off the network.
import puppeteer, { type Browser } from 'puppeteer-core';

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
