import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import puppeteer, { type Browser } from 'puppeteer-core';
import { chromium } from 'playwright-core';
import { startGateway, newToken, until, type TestGateway } from '../support/gateway.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const FILE_TEXT = 'runplane session download\n';

/** A local site: a page with a title and a link to a file served as an attachment. */
async function startPages(): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    if (req.url === '/pad') return void res.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><title>pad</title><body style="margin:0"><textarea id="t" style="position:fixed;inset:0;width:100vw;height:100vh;font-size:30px" onclick="window.clicks=(window.clicks||0)+1"></textarea></body>`);
    if (req.url === '/file.txt') return void res.writeHead(200, { 'content-type': 'text/plain', 'content-disposition': 'attachment; filename="report.txt"' }).end(FILE_TEXT);
    res.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><title>Session page</title><h1 id="h">hello</h1><a id="dl" href="/file.txt" download>report</a>`);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/** The pid the gateway logged for the session's `key` (chrome_pid or agent_pid). */
function loggedPid(gw: TestGateway, sessionId: string, key: 'chrome_pid' | 'agent_pid'): number {
  for (const line of gw.logs) {
    const o = JSON.parse(line) as Body;
    if (o.msg === 'plane session opened' && o.run_id === sessionId && typeof o[key] === 'number') return o[key] as number;
  }
  throw new Error(`no ${key} logged for ${sessionId}`);
}

// Unmodified clients (puppeteer-core's connect, playwright-core's connectOverCDP) drive a
// session's browser through the gateway, on both planes, with real agents and Chromium.
describe('browser sessions: unmodified CDP clients through the gateway (real agents and Chromium)', function () {
  this.timeout(240_000);
  let gw: TestGateway;
  let site: { url: string; server: Server };
  const token = newToken();
  const headers = { 'X-Service-Token': token };

  before(async () => {
    site = await startPages();
    gw = await startGateway({
      env: { SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1' },
      keys: { [token]: { tenant_id: 'acme', rate_limit_per_minute: 0, max_concurrent_runs: 4 } },
    });
  });
  after(async () => {
    await gw?.close();
    site?.server.close();
  });

  const create = async (body: Body): Promise<Body> => {
    const r = await gw.req('POST', '/v1/sessions', { token, body });
    expect(r.status, r.text).to.equal(200);
    return r.body as Body;
  };
  const get = async (id: string): Promise<Body> => (await gw.req('GET', `/v1/sessions/${id}`, { token })).body as Body;

  for (const plane of ['dom_plane', 'computer_plane'] as const) {
    it(`${plane}: puppeteer connects with the token header, browses, screenshots, sets cookies and downloads; playwright re-attaches with a ticket and finds the page; DELETE disconnects it`, async () => {
      const s = await create({ compute_backend: plane, keep_alive: true, idle_timeout_seconds: 60 });
      const browser: Browser = await puppeteer.connect({ browserWSEndpoint: s.cdp_url as string, headers, defaultViewport: null });
      // the client sees the session's one tab, not a launch tab of the browser beside it
      expect((await browser.pages()).map((p) => p.url())).to.deep.equal(['about:blank']);
      const page = await browser.newPage();
      await page.goto(`${site.url}/`);
      expect(await page.title()).to.equal('Session page');
      expect(await page.evaluate(() => 6 * 7)).to.equal(42);
      const png = await page.screenshot();
      expect(Buffer.from(png).subarray(1, 4).toString()).to.equal('PNG');
      await page.setCookie({ name: 'kept', value: 'yes', url: site.url });
      expect(await page.evaluate('document.cookie')).to.include('kept=yes');
      // a download lands in the session's own folder, whatever path the client asks for
      const cdp = await browser.target().createCDPSession();
      await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: '/etc', eventsEnabled: true });
      const done = new Promise<Body>((resolve) => cdp.on('Browser.downloadProgress', (e) => e.state === 'completed' && resolve(e as Body)));
      await page.click('#dl');
      const progress = await done;
      expect(progress.totalBytes).to.equal(FILE_TEXT.length);
      const listed = await gw.req('GET', `/v1/sessions/${s.session_id}/downloads`, { token });
      expect(listed.status, listed.text).to.equal(200);
      const file = (listed.body.files as Body[]).find((f) => f.bytes === FILE_TEXT.length);
      expect(file, listed.text).to.not.equal(undefined);
      const bytes = await gw.req('GET', `/v1/sessions/${s.session_id}/downloads/${file!.name}`, { token });
      expect(bytes.status).to.equal(200);
      expect(bytes.text).to.equal(FILE_TEXT);
      expect((await gw.req('GET', `/v1/sessions/${s.session_id}/downloads/..%2Fkeys.json`, { token })).status).to.be.oneOf([400, 404]);
      // browser.close() over CDP does not end the session; disconnect leaves it for a re-attach
      await browser.close();
      expect((await get(s.session_id as string)).status).to.equal('live');

      const again = await gw.req('POST', `/v1/sessions/${s.session_id}/connect`, { token });
      const pw = await chromium.connectOverCDP(again.body.connect_url as string);
      const urls = pw.contexts().flatMap((c) => c.pages().map((p) => p.url()));
      expect(urls).to.include(`${site.url}/`);
      const pwPage = pw.contexts()[0]!.pages().find((p) => p.url() === `${site.url}/`)!;
      expect(await pwPage.textContent('#h')).to.equal('hello');
      // a page opened in Playwright's default context is the session's: in the one context its tabs are in
      const opened = await pw.contexts()[0]!.newPage();
      await opened.goto(`${site.url}/`);
      const cdp2 = await pw.newBrowserCDPSession();
      const { targetInfos } = (await cdp2.send('Target.getTargets')) as { targetInfos: Array<{ type: string; url: string; browserContextId: string }> };
      const pageTargets = targetInfos.filter((t) => t.type === 'page');
      expect(pageTargets.length, JSON.stringify(pageTargets)).to.equal(3);
      expect(new Set(pageTargets.map((t) => t.browserContextId)).size, JSON.stringify(pageTargets)).to.equal(1);
      await cdp2.detach();
      await opened.close();
      const gone = new Promise<void>((resolve) => pw.on('disconnected', () => resolve()));
      const del = await gw.req('DELETE', `/v1/sessions/${s.session_id}`, { token });
      expect(del.body).to.include({ status: 'ended', end_reason: 'released' });
      await gone;
      if (plane === 'dom_plane') {
        // the browser a CDP client had is never lent again: it closes after the release (in the background), and is gone
        const pid = loggedPid(gw, s.session_id as string, 'chrome_pid');
        const alive = (): boolean => {
          try {
            process.kill(pid, 0);
            return true;
          } catch {
            return false;
          }
        };
        expect(await until(async () => !alive(), 15_000), `chrome ${pid} still running`).to.equal(true);
      }
      // the recording: a computer_plane session's display is recorded; whatever the plane kept is served
      const ended = await get(s.session_id as string);
      if (plane === 'computer_plane') expect(ended.video_url).to.equal(`${gw.url}/v1/sessions/${s.session_id}/video`);
      if (ended.video_url) {
        const video = await fetch(ended.video_url as string, { headers });
        expect(video.status).to.equal(200);
        expect(video.headers.get('content-type')).to.equal('video/webm');
        expect((await video.arrayBuffer()).byteLength).to.be.greaterThan(1000);
      }
      // the trace reads back like a run's: a step where the client navigated, with the screenshot after
      expect(ended.trace_url).to.equal(`${gw.url}/v1/sessions/${s.session_id}/trace`);
      const trace = await gw.req('GET', `/v1/sessions/${s.session_id}/trace`, { token });
      expect(trace.status, trace.text).to.equal(200);
      const files = (trace.body.files as Body[]).map((f) => f.path as string);
      const stepFiles = files.filter((f) => /^steps\/\d+\.json$/.test(f));
      expect(stepFiles.length, files.join(' ')).to.be.greaterThan(0);
      const steps = await Promise.all(stepFiles.map(async (f) => (await gw.req('GET', `/v1/sessions/${s.session_id}/trace/${f}`, { token })).body as Body));
      const visit = steps.find((st) => st.final_url === `${site.url}/`);
      expect(visit, JSON.stringify(steps)).to.not.equal(undefined);
      expect(visit!.step_type).to.equal('cdp');
      // the agent's relay told what the client did: its navigation to the site
      expect(steps.map((st) => st.intent as string).join(' | ')).to.include(`navigate ${site.url}/`);
      expect(files.some((f) => /^screenshots\/.*\.png$/.test(f)), files.join(' ')).to.equal(true);
      expect((await gw.req('GET', `/v1/sessions/${s.session_id}/trace/..%2F..%2Fkeys.json`, { token })).status).to.equal(404);
    });
  }

  it('isolation: file:// and chrome:// navigations and a context with its own proxy are refused; the session stays live', async () => {
    const s = await create({ compute_backend: 'dom_plane', keep_alive: true });
    const browser = await puppeteer.connect({ browserWSEndpoint: s.cdp_url as string, headers });
    const page = await browser.newPage();
    for (const url of ['file:///etc/passwd', 'chrome://version']) {
      const err = await page.goto(url).then(() => undefined, (e: Error) => e);
      expect(err?.message, url).to.match(/runplane/);
    }
    const ctx = await browser.createBrowserContext({ proxyServer: 'http://127.0.0.1:9' }).then(() => undefined, (e: Error) => e);
    expect(ctx?.message).to.match(/runplane/);
    expect(await page.evaluate('location.protocol')).not.to.equal('file:');
    expect((await get(s.session_id as string)).status).to.equal('live');
    await browser.disconnect();
    await gw.req('DELETE', `/v1/sessions/${s.session_id}`, { token });
  });

  it('keep_alive false: the session ends when its last client disconnects (client_disconnected), and its slot is free', async () => {
    const s = await create({ compute_backend: 'dom_plane' });
    const browser = await puppeteer.connect({ browserWSEndpoint: s.connect_url as string });
    expect(await (await browser.newPage()).evaluate(() => 1 + 1)).to.equal(2);
    await browser.disconnect();
    expect(await until(async () => (await get(s.session_id as string)).status === 'ended', 15_000)).to.equal(true);
    expect((await get(s.session_id as string)).end_reason).to.equal('client_disconnected');
    expect(await until(async () => (await gw.gateway.services.limits.runningCount('acme')) === 0, 5000)).to.equal(true);
  });

  for (const victim of ['chrome_pid', 'agent_pid'] as const) {
    it(`SIGKILL of the ${victim === 'chrome_pid' ? 'browser' : 'agent'} mid-session: the client's socket closes, the session ends browser_lost, its slot is free`, async () => {
      const s = await create({ compute_backend: 'dom_plane', keep_alive: true });
      const browser = await puppeteer.connect({ browserWSEndpoint: s.cdp_url as string, headers });
      await (await browser.newPage()).goto(`${site.url}/`);
      const disconnected = new Promise<void>((resolve) => browser.on('disconnected', () => resolve()));
      process.kill(loggedPid(gw, s.session_id as string, victim), 'SIGKILL');
      await disconnected;
      expect(await until(async () => (await get(s.session_id as string)).status === 'ended', 20_000)).to.equal(true);
      expect((await get(s.session_id as string)).end_reason).to.equal('browser_lost');
      expect(await until(async () => (await gw.gateway.services.limits.runningCount('acme')) === 0, 5000)).to.equal(true);
    });
  }

  it('the computer API: xdotool input on a computer_plane session reaches the page; a screenshot on both planes; dom_plane refuses input', async () => {
    const s = await create({ compute_backend: 'computer_plane', keep_alive: true });
    const browser = await puppeteer.connect({ browserWSEndpoint: s.cdp_url as string, headers, defaultViewport: null });
    const [page] = await browser.pages();
    await page!.goto(`${site.url}/pad`);
    await page!.bringToFront();
    const act = (body: Body) => gw.req('POST', `/v1/sessions/${s.session_id}/computer`, { token, body });
    for (const body of [{ action: 'click', x: 640, y: 400 }, { action: 'type', text: 'typed by xdotool' }, { action: 'key', keys: 'Return' }, { action: 'type', text: 'x' }]) {
      const r = await act(body);
      expect(r.status, r.text).to.equal(200);
      expect(r.body).to.deep.equal({ action: body.action, ok: true });
    }
    expect(await page!.evaluate('document.getElementById("t").value')).to.equal('typed by xdotool\nx');
    expect(await page!.evaluate('window.clicks')).to.equal(1);
    const shot = await act({ action: 'screenshot' });
    expect(shot.headers.get('content-type')).to.equal('image/png');
    for (const bad of [{ action: 'click', x: 1 }, { action: 'teleport' }, { action: 'key', keys: 'ctrl+l; rm -rf /' }, { action: 'type', text: '' }]) {
      const r = await act(bad);
      expect(r.status, JSON.stringify(bad)).to.equal(400);
    }
    await browser.disconnect();
    await gw.req('DELETE', `/v1/sessions/${s.session_id}`, { token });
    const dom = await create({ compute_backend: 'dom_plane', keep_alive: true });
    const refused = await gw.req('POST', `/v1/sessions/${dom.session_id}/computer`, { token, body: { action: 'click', x: 5, y: 5 } });
    expect(refused.status).to.equal(409);
    const domShot = await gw.req('POST', `/v1/sessions/${dom.session_id}/computer`, { token, body: { action: 'screenshot' } });
    expect(domShot.status).to.equal(200);
    expect(domShot.headers.get('content-type')).to.equal('image/png');
    await gw.req('DELETE', `/v1/sessions/${dom.session_id}`, { token });
  });
});

