// dom_plane's wait after an input (agents/dom/settle.ts) against a real Chromium:
// whatever the input set off (a fetch, a fetch started a task later, a
// navigation by link or by script) has landed in the page when it returns, and
// an input that set off nothing, or a request that never ends, does not hold it.
import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'puppeteer-core';
import { afterInput } from '../../agents/dom/settle.ts';
import { launchTestBrowser } from '../support/browser.ts';

const PAGE = `<!doctype html><title>settle</title>
<h1 id="n">0</h1>
<button id="fetch" onclick="fetch('/slow?ms=300').then((r) => r.text()).then((t) => { document.getElementById('n').textContent = t; })">fetch</button>
<button id="micro" onclick="Promise.resolve().then(() => Promise.resolve()).then(() => fetch('/slow?ms=200')).then((r) => r.text()).then((t) => { document.getElementById('n').textContent = 'micro ' + t; })">micro</button>
<button id="timer" onclick="setTimeout(() => fetch('/slow?ms=200').then((r) => r.text()).then((t) => { document.getElementById('n').textContent = 'timer ' + t; }), 0)">timer</button>
<button id="xhr" onclick="const x = new XMLHttpRequest(); x.open('GET', '/slow?ms=250'); x.onload = () => { document.getElementById('n').textContent = 'xhr ' + x.responseText; }; x.send()">xhr</button>
<button id="script-nav" onclick="location.href = '/next?ms=300'">script nav</button>
<a id="link" href="/next?ms=300">link</a>
<button id="nothing">nothing</button>
<button id="poll" onclick="fetch('/never')">poll</button>`;

describe('dom_plane settle: what an input set off has landed when it returns', function () {
  this.timeout(60_000);
  let browser: Browser;
  let server: http.Server;
  let site = '';
  let page: Page;
  /** answers of /slow (the favicon and pages are not counted) */
  let served = 0;
  const hanging: http.ServerResponse[] = [];

  before(async () => {
    server = http.createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      const ms = Number(u.searchParams.get('ms') ?? 0);
      if (u.pathname === '/never') return void hanging.push(res);
      setTimeout(() => {
        if (u.pathname === '/slow') return void res.end(`done ${++served}`);
        // the next page's load event waits for its image, which is slow too
        if (u.pathname === '/next') return void res.end(`<!doctype html><title>next</title><img src="/img?ms=${ms}"><p id="next">next page</p>`);
        if (u.pathname === '/img') return void res.writeHead(204).end();
        res.setHeader('content-type', 'text/html');
        res.end(PAGE);
      }, ms);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    site = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    browser = await launchTestBrowser();
    page = await browser.newPage();
  });
  after(async () => {
    for (const r of hanging) r.destroy();
    await browser?.close();
    await new Promise<void>((r) => server?.close(() => r()));
  });
  beforeEach(async () => {
    await page.goto(`${site}/`, { waitUntil: 'load' });
  });

  const text = (sel: string) => page.$eval(sel, (e) => e.textContent);
  const click = (sel: string) => () => page.click(sel);

  it('waits for a fetch the click started and for its handler to update the page', async () => {
    const r = await afterInput(page, click('#fetch'), 5000);
    expect(r).to.deep.equal({ navigated: false, settled: true });
    expect(await text('#n')).to.match(/^done \d+$/);
  });

  it('waits for a fetch started after a chain of microtasks', async () => {
    const r = await afterInput(page, click('#micro'), 5000);
    expect(r.settled).to.equal(true);
    expect(await text('#n')).to.match(/^micro done \d+$/);
  });

  it('waits for a fetch started by a zero-delay timer of the click handler', async () => {
    const r = await afterInput(page, click('#timer'), 5000);
    expect(r.settled).to.equal(true);
    expect(await text('#n')).to.match(/^timer done \d+$/);
  });

  it('waits for an XMLHttpRequest and its load handler', async () => {
    const r = await afterInput(page, click('#xhr'), 5000);
    expect(r.settled).to.equal(true);
    expect(await text('#n')).to.match(/^xhr done \d+$/);
  });

  for (const [name, sel] of [
    ['a link', '#link'],
    ['a script setting location', '#script-nav'],
  ] as const) {
    it(`waits until the page ${name} opened has loaded`, async () => {
      const r = await afterInput(page, click(sel), 5000);
      expect(r).to.deep.equal({ navigated: true, settled: true });
      expect(page.url()).to.equal(`${site}/next?ms=300`);
      expect(await page.evaluate('document.readyState')).to.equal('complete');
      expect(await text('#next')).to.equal('next page');
    });
  }

  it('returns settled for an input that set nothing off, with the page unchanged', async () => {
    const before = served;
    const r = await afterInput(page, click('#nothing'), 5000);
    expect(r).to.deep.equal({ navigated: false, settled: true });
    expect(served).to.equal(before);
    expect(await text('#n')).to.equal('0');
  });

  it('does not hold the step on a request that never ends: answers settled false within its cap', async () => {
    const r = await afterInput(page, click('#poll'), 60_000);
    expect(r).to.deep.equal({ navigated: false, settled: false });
  });
});
