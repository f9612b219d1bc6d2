// Issue 41: browser sessions in the viewer, driven in a real browser (Debian's
// Chromium via puppeteer-core) against a real gateway whose local dom_plane agents
// hold real sessions: the list with a live and an ended session, paged; a live
// session's page with its CDP URL and its screen refreshed from the plane;
// Release ending it; another tenant's session answered 404; and the token in no
// URL the page asked for and nowhere in its DOM.
import { expect } from 'chai';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { newToken, startGateway, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';
import { launchTestBrowser, snapshot } from '../support/browser.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any



describe('the viewer (/ui): browser sessions, live and finished, in a real browser on real sessions', function () {
  this.timeout(240_000);
  let gw: TestGateway;
  let site: Site;
  let browser: Browser;
  let page: Page;
  const alpha = newToken();
  const beta = newToken();
  const asked: string[] = []; // every URL the viewer's page requested
  let live: Body;
  let ended: Body;

  before(async () => {
    site = await startSite();
    gw = await startGateway({
      env: { SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1' },
      keys: {
        [alpha]: { tenant_id: 'alpha', rate_limit_per_minute: 0, max_concurrent_runs: 3 },
        [beta]: { tenant_id: 'beta', rate_limit_per_minute: 0, max_concurrent_runs: 3 },
      },
    });
    const create = async () => {
      const r = await gw.req('POST', '/v1/sessions', { token: alpha, body: { compute_backend: 'dom_plane', keep_alive: true, idle_timeout_seconds: 600 } });
      expect(r.status, r.text).to.equal(200);
      return r.body as Body;
    };
    ended = await create();
    expect((await gw.req('DELETE', `/v1/sessions/${ended.session_id}`, { token: alpha })).body.status).to.equal('ended');
    live = await create();
    // a client puts a page on the live session's screen, then leaves it (kept alive)
    const client = await puppeteer.connect({ browserWSEndpoint: live.cdp_url as string, headers: { 'X-Service-Token': alpha }, defaultViewport: null });
    // the session's own tab is in its browser context, not the default one
    const tab = (await client.pages()).find((p) => p.browserContext() !== client.defaultBrowserContext());
    expect(tab, "the session's tab").to.not.equal(undefined);
    await tab!.goto(`${site.url}/counter`);
    await client.disconnect();
    browser = await launchTestBrowser();
    page = await browser.newPage();
    page.on('request', (r) => void asked.push(r.url()));
  });
  after(async () => {
    await browser?.close();
    if (live) await gw?.req('DELETE', `/v1/sessions/${live.session_id}`, { token: alpha }).catch(() => undefined);
    await gw?.close();
    await site?.close();
  });

  const signIn = async (token: string) => {
    await page.goto(`${gw.url}/ui/`);
    await page.waitForSelector('#token');
    await page.type('#token', token);
    await page.click('form.signin button');
    await page.waitForSelector('table.runs');
  };
  const text = (sel: string) => page.$eval(sel, (el) => el.textContent ?? '');
  const rows = () => page.$$eval('table.sessions tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')));

  it('lists the sessions newest first from the header link: the live one and the ended one with its reason', async () => {
    await signIn(alpha);
    await page.click('header nav a[href="#/sessions"]');
    await page.waitForSelector('table.sessions tbody tr a');
    const got = await rows();
    expect(got.map((r) => [r[1], r[2], r[3], r[5]])).to.deep.equal([
      [live.session_id, 'live', 'dom_plane', ''],
      [ended.session_id, 'ended', 'dom_plane', 'released'],
    ]);
    expect(got[0]![4], 'a live session has no duration yet').to.equal('live');
    expect(got[1]![4]).to.match(/^\d+\.\d s$/);
    await snapshot(page, 'sessions-list');
  });

  it('pages with More', async () => {
    await page.goto(`${gw.url}/ui/#/sessions?limit=1`);
    await page.waitForFunction("document.querySelectorAll('table.sessions tbody tr a').length === 1");
    expect((await rows()).map((r) => r[1])).to.deep.equal([live.session_id]);
    await page.waitForSelector('#more:not([hidden])');
    await page.click('#more');
    await page.waitForFunction("document.querySelectorAll('table.sessions tbody tr a').length === 2");
    expect((await rows()).map((r) => r[1])).to.deep.equal([live.session_id, ended.session_id]);
  });

  it("opens a live session: its fields, its CDP URL, and its screen refreshed from the plane", async () => {
    await page.goto(`${gw.url}/ui/#/sessions`);
    await page.waitForSelector(`a[href="#/sessions/${live.session_id}"]`);
    await page.click(`a[href="#/sessions/${live.session_id}"]`);
    await page.waitForSelector('#cdp-url');
    expect(await text('h1 .badge')).to.equal('live');
    expect(await text('#cdp-url')).to.equal(live.cdp_url);
    // a real PNG of the session's screen, through an object URL (never a URL with the token)
    await page.waitForFunction("document.querySelector('#screen').complete && document.querySelector('#screen').naturalWidth > 0", { timeout: 30_000 });
    const first = await page.$eval('#screen', (img) => [(img as unknown as { src: string }).src, (img as unknown as { naturalWidth: number }).naturalWidth] as const);
    expect(first[0]).to.match(/^blob:/);
    expect(first[1]).to.equal(1280);
    // the page the client opened, not a blank screen: more than one colour in it
    const colours = await page.evaluate(`(() => {
      const img = document.querySelector('#screen');
      const c = document.createElement('canvas');
      [c.width, c.height] = [img.naturalWidth, img.naturalHeight];
      const g = c.getContext('2d');
      g.drawImage(img, 0, 0);
      const d = g.getImageData(0, 0, c.width, c.height).data;
      const seen = new Set();
      for (let i = 0; i < d.length; i += 4 * 997) seen.add(d[i] + ',' + d[i + 1] + ',' + d[i + 2]);
      return seen.size;
    })()`);
    expect(colours, 'the screen shows the page the client opened').to.be.above(1);
    // refreshed: a new image replaces it while the page stays
    await page.waitForFunction(`document.querySelector('#screen').src !== ${JSON.stringify(first[0])}`, { timeout: 30_000 });
    expect(await page.$eval('#screen', (img) => (img as unknown as { naturalWidth: number }).naturalWidth)).to.equal(1280);
    await snapshot(page, 'session-live');
  });

  it('stops refreshing the screen once the page is left', async () => {
    await page.evaluate("location.hash = '#/sessions'");
    await page.waitForSelector('table.sessions tbody tr a');
    const before = asked.filter((u) => u.endsWith('/computer')).length;
    // three refresh periods with the list on screen: no screenshot asked for
    await new Promise((r) => setTimeout(r, 6500));
    expect(asked.filter((u) => u.endsWith('/computer')).length).to.equal(before);
  });

  it('Release ends the session: the page shows it ended, released, and the API says so', async () => {
    await page.goto(`${gw.url}/ui/#/sessions/${live.session_id}`);
    await page.waitForFunction("document.querySelector('#screen')?.naturalWidth > 0", { timeout: 30_000 });
    await page.click('#release');
    await page.waitForFunction("document.querySelector('h1 .badge')?.textContent === 'ended'", { timeout: 30_000 });
    expect(await text('#end-reason')).to.equal('released');
    expect(await text('#end-detail')).to.not.equal('');
    expect(await page.$('#screen'), 'no live screen once ended').to.equal(null);
    expect(await page.$('#release')).to.equal(null);
    const after = (await gw.req('GET', `/v1/sessions/${live.session_id}`, { token: alpha })).body as Body;
    expect(after).to.include({ status: 'ended', end_reason: 'released' });
    // the plane recorded it: the recording, fetched with the token header into an object URL, plays
    await page.waitForSelector('#video', { timeout: 30_000 });
    expect((await gw.req('GET', `/v1/sessions/${live.session_id}`, { token: alpha })).body.video_url, 'a dom_plane session keeps its recording').to.be.a('string');
    expect(await page.$eval('#video', (v) => (v as unknown as { src: string }).src)).to.match(/^blob:/);
    await page.waitForFunction("document.querySelector('#video').readyState >= 1", { timeout: 20_000 });
    await snapshot(page, 'session-ended');
  });

  it("shows another tenant's session as the API's 404 detail", async () => {
    await page.click('#signout');
    await signIn(beta);
    const detail = (await gw.req('GET', `/v1/sessions/${ended.session_id}`, { token: beta })).body.detail as string;
    expect(detail).to.be.a('string').and.not.equal('');
    await page.goto(`${gw.url}/ui/#/sessions/${ended.session_id}`);
    await page.waitForSelector('p.error');
    expect(await text('p.error')).to.equal(detail);
    await page.goto(`${gw.url}/ui/#/sessions`);
    await page.waitForSelector('table.sessions tbody tr');
    expect(await text('table.sessions tbody')).to.equal('No sessions yet.');
  });

  it('keeps the tokens out of every URL the page asked for, its DOM, and the gateway logs', async () => {
    expect(asked.some((u) => u.includes('/v1/sessions')), 'the page did call the sessions API').to.equal(true);
    for (const t of [alpha, beta]) {
      expect(asked.filter((u) => u.includes(t))).to.deep.equal([]);
      expect(page.url()).to.not.include(t);
      expect(await page.content()).to.not.include(t);
      expect(gw.logs.join('\n')).to.not.include(t);
    }
  });
});
