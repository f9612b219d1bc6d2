// Browser sessions over CDP, the agent's side (issue 41): an unmodified puppeteer-core
// client through Cdp streams (openCdpStream, bridged to a local ws server as the gateway
// will) to a dom_plane session's browser, with the relay's isolation filter in the path.
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { expect } from 'chai';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { connectPlane, type PlaneSession } from '../../gateway/planes/index.ts';
import { cdpBridge, rawCdp, type CdpBridge } from './cdp-support.ts';
import { startAgentProcess, type AgentProc } from './support.ts';

const FILE = Buffer.from(Array.from({ length: 5000 }, (_, i) => i % 251));

async function startSite(): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    if (u.pathname === '/file.bin') {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-disposition': `attachment; filename="${u.searchParams.get('name') ?? 'report.bin'}"` });
      res.end(FILE);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(`<!doctype html><title>page ${req.url}</title><body><h1>${req.url}</h1><a id="d" href="/file.bin?name=${new URL(req.url ?? '/', 'http://x').searchParams.get('name') ?? ''}">get</a></body>`);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const a = server.address();
  return { url: `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`, server };
}

/** The browser's own debugging port, read where Chromium writes it (its --user-data-dir). */
function debuggingPort(chromePid: number): number {
  const args = readFileSync(`/proc/${chromePid}/cmdline`, 'utf8').split('\0');
  const dir = args.find((a) => a.startsWith('--user-data-dir='))!.slice('--user-data-dir='.length);
  return Number(readFileSync(`${dir}/DevToolsActivePort`, 'utf8').split('\n')[0]);
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('CDP relay (dom_plane)', function () {
  this.timeout(90_000);
  let agent: AgentProc;
  let site: { url: string; server: Server };
  let agentUrl: string;
  let s: PlaneSession;
  let token = '';
  let chromePid = 0;
  let warm = false;
  let bridge: CdpBridge;
  let n = 0;

  afterEach(function () {
    if (this.currentTest?.state === 'failed') console.error(`dom_plane agent log:\n${agent?.stderr() ?? ''}`);
  });
  before(async () => {
    site = await startSite();
    // the warm pool: the browser a session is lent is the path sessions take
    // a short orphan time: an open Cdp stream must count as the session being seen
    agent = await startAgentProcess('dom', { PLANE_WARM_POOL: '1', PLANE_SESSION_ORPHAN_SECONDS: '3' });
    agentUrl = `grpc://127.0.0.1:${agent.grpcPort}`;
    bridge = await cdpBridge(agentUrl, () => token);
  });
  after(async () => {
    await s?.close().catch(() => undefined);
    s?.disconnect();
    await bridge?.close();
    await agent?.stop();
    site?.server.close();
  });

  async function newSession(): Promise<void> {
    if (s && token) await s.close().catch(() => undefined);
    s?.disconnect();
    s = connectPlane({ url: agentUrl, deadlineMs: 30_000 });
    n += 1;
    const init = await s.init({ tenant_id: 'acme', profile_id: `p${n}`, run_id: `sess-${n}`, enable_cdp: true, persist_profile: false });
    token = init.session_token;
    chromePid = init.chrome_pid ?? 0;
    warm = init.warm === true;
  }

  describe('one session driven by puppeteer', () => {
    let browser: Browser;
    before(async () => {
      await newSession();
      // the first session takes the pool's browser (waited for): a context of its own in a shared browser
      expect(warm).to.equal(true);
      browser = await puppeteer.connect({ browserWSEndpoint: bridge.url, defaultViewport: { width: 800, height: 600 } });
    });
    after(async () => {
      await browser?.disconnect().catch(() => undefined);
    });

    it('opens a page, navigates, evaluates and screenshots', async () => {
      const page = await browser.newPage();
      await page.goto(`${site.url}/one`);
      expect(await page.title()).to.equal('page /one');
      await page.goto(`${site.url}/two`);
      expect(await page.evaluate("document.querySelector('h1')?.textContent")).to.equal('/two');
      expect(await page.evaluate('6 * 7')).to.equal(42);
      const shot = Buffer.from(await page.screenshot({ type: 'png' }));
      expect(shot.subarray(1, 4).toString()).to.equal('PNG');
      expect(shot.readUInt32BE(16)).to.equal(800);
      await page.close();
    });

    it('sets and reads a cookie', async () => {
      const page = await browser.newPage();
      await page.goto(`${site.url}/c`);
      await page.setCookie({ name: 'flavour', value: 'oat', url: site.url });
      expect((await page.cookies()).find((c) => c.name === 'flavour')?.value).to.equal('oat');
      expect(await page.evaluate('document.cookie')).to.include('flavour=oat');
      await page.close();
    });

    it('downloads into the session folder from every context, listed and fetched by the downloads ops', async () => {
      const listed = async (name: string): Promise<void> => {
        let files: Array<{ name: string; bytes: number }> = [];
        while (!files.some((f) => f.name === name && f.bytes === FILE.length)) {
          await new Promise((r) => setTimeout(r, 100));
          files = (await s.call('downloads', 'GET')).body.files as typeof files;
        }
      };
      const download = async (page: Page, name: string): Promise<void> => {
        await page.goto(`${site.url}/dl?name=${name}`);
        await page.click('#d');
        await listed(name);
      };
      // the default context, the client never asking: the relay's own default applies
      const page = await browser.newPage();
      await download(page, 'plain.bin');
      // the client names its own folder: the file lands in the session's all the same
      const cdp = await page.createCDPSession();
      await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: '/tmp' });
      await download(page, 'asked.bin');
      await cdp.detach();
      // a context the client makes, and the session's own (lent by the warm pool)
      const made = await browser.createBrowserContext();
      await download(await made.newPage(), 'made.bin');
      const own = browser.browserContexts().find((c) => c !== browser.defaultBrowserContext() && c !== made);
      expect(own, "the session's own context").to.not.equal(undefined);
      await download(await own!.newPage(), 'own.bin');
      expect(existsSync('/tmp/asked.bin')).to.equal(false);

      const got = await s.call('downloads/file', 'POST', { name: 'asked.bin' });
      expect(got.body).to.include({ name: 'asked.bin', bytes: FILE.length });
      expect(Buffer.compare(got.blob!, FILE)).to.equal(0);
      // the same ops on the HTTP wire contract: the list as JSON, the file as itself
      const http = `http://127.0.0.1:${agent.httpPort}`;
      const list = (await (await fetch(`${http}/downloads`, { headers: { 'x-service-session': token } })).json()) as { files: Array<{ name: string }> };
      expect(list.files.map((f) => f.name)).to.include.members(['plain.bin', 'asked.bin', 'made.bin', 'own.bin']);
      const raw = await fetch(`${http}/downloads/file`, { method: 'POST', headers: { 'x-service-session': token, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'own.bin' }) });
      expect(raw.headers.get('content-type')).to.equal('application/octet-stream');
      expect(Buffer.compare(Buffer.from(await raw.arrayBuffer()), FILE)).to.equal(0);
      const missing = await s.call('downloads/file', 'POST', { name: 'nope.bin' }).catch((e: { status: number }) => e);
      expect(missing).to.include({ status: 404 });
      const escape = await s.call('downloads/file', 'POST', { name: '../../../etc/passwd' }).catch((e: { status: number }) => e);
      expect(escape).to.include({ status: 400 });
      await made.close();
      await page.close();
    });

    it('keeps the debugging port out of reach of pages (navigation, fetch and WebSocket)', async () => {
      const port = debuggingPort(chromePid);
      const page = await browser.newPage();
      const res = await page.goto(`http://127.0.0.1:${port}/json/version`);
      expect(res?.status()).to.equal(403);
      expect(await page.content()).to.include('Blocked by the egress guard').and.not.include('webSocketDebuggerUrl');
      await page.goto(`${site.url}/probe`);
      // an opaque (no-cors) answer looks alike whoever gave it: the guard's count says it refused
      const blocked = async (): Promise<{ count: number; host?: string }> => {
        const e = (await s.call('health', 'GET')).body.egress as { blocked_count: number; last_blocked: { host: string } | null };
        return { count: e.blocked_count, host: e.last_blocked?.host };
      };
      const before = await blocked();
      await page.evaluate(async (p: number) => {
        await fetch(`http://127.0.0.1:${p}/json/version`, { mode: 'no-cors' }).catch(() => undefined);
      }, port);
      const afterFetch = await blocked();
      expect(afterFetch).to.deep.equal({ count: before.count + 1, host: '127.0.0.1' });
      const ws = await page.evaluate(
        (p: number) =>
          new Promise<string>((resolve) => {
            const w = new WebSocket(`ws://127.0.0.1:${p}/devtools/browser`);
            w.onopen = () => resolve('open');
            w.onerror = () => resolve('failed');
          }),
        port,
      );
      expect(ws).to.equal('failed');
      expect((await blocked()).count).to.equal(afterFetch.count + 1);
      await page.close();
    });

    it('refuses file:// navigation and a context with its own proxy', async () => {
      const page = await browser.newPage();
      const nav = await page.goto('file:///etc/passwd').catch((e: Error) => e);
      expect(String(nav)).to.match(/runplane: file: urls are not allowed/);
      const ctx = await browser.createBrowserContext({ proxyServer: 'http://127.0.0.1:9' }).catch((e: Error) => e);
      expect(String(ctx)).to.match(/runplane: a browser context with its own proxy is not allowed/);
      await page.close();
    });

    it('keeps the session and its browser when the client calls browser.close()', async () => {
      await browser.close();
      expect(alive(chromePid)).to.equal(true);
      const h = await s.health();
      expect(h).to.include({ session_bound: true, ok: true });
      // and a client re-attaches to it
      browser = await puppeteer.connect({ browserWSEndpoint: bridge.url });
      const page = await browser.newPage();
      await page.goto(`${site.url}/again`);
      expect(await page.title()).to.equal('page /again');
    });
  });

  describe('streams', () => {
    it('serves two streams on one session at once; one cancelled leaves the other', async () => {
      await newSession();
      const a = rawCdp(agentUrl, token);
      const b = rawCdp(agentUrl, token);
      const [ra, rb] = await Promise.all([a.send('Browser.getVersion'), b.send('Browser.getVersion')]);
      expect((ra.result as { product: string }).product).to.match(/Chrome/);
      expect((rb.result as { product: string }).product).to.match(/Chrome/);
      // the relay's own set-up commands (negative ids) are answered to the relay, not passed on
      expect(a.ids).to.deep.equal([1]);
      a.stream.close();
      expect(await a.ended).to.equal('closed');
      const again = await b.send('Runtime.evaluate', { expression: '1+1' });
      expect(again).to.have.property('error'); // no target: the browser answers for itself, the stream lives
      // a frame of 10 MB (a large script) goes through: the agent takes up to 16 MB
      const big = await b.send('Target.getTargets').then(async (t) => {
        const page = (t.result as { targetInfos: Array<{ targetId: string; type: string }> }).targetInfos.find((i) => i.type === 'page')!;
        const sid = ((await b.send('Target.attachToTarget', { targetId: page.targetId, flatten: true })).result as { sessionId: string }).sessionId;
        return b.send('Runtime.evaluate', { expression: `"${'a'.repeat(10_000_000)}".length`, returnByValue: true }, sid);
      });
      expect((big.result as { result: { value: number } }).result.value).to.equal(10_000_000);
      const t = await b.send('Target.getTargets');
      expect((t.result as { targetInfos: unknown[] }).targetInfos).to.be.an('array');
      b.stream.close();
    });

    it('refuses a wrong or missing session token', async () => {
      const wrong = rawCdp(agentUrl, 'f'.repeat(64));
      expect(await wrong.ended).to.equal('missing or wrong X-Service-Session');
    });

    it('ends a malformed stream with INVALID_ARGUMENT', async () => {
      const c = rawCdp(agentUrl, token);
      c.stream.send('{"method":"Page.enable"}');
      expect(await c.ended).to.match(/integer id/);
      // the session is untouched
      expect((await s.health()).session_bound).to.equal(true);
    });

    it('ends every stream with the reason when the session closes; the warm browser a client had is not lent again', async () => {
      await newSession();
      expect(warm).to.equal(true);
      const before = chromePid;
      const c = rawCdp(agentUrl, token);
      await c.send('Browser.getVersion');
      await s.close();
      expect(await c.ended).to.equal('session closed');
      await newSession();
      expect(chromePid).to.not.equal(before);
    });

    it('ends the stream with the loss when the browser is SIGKILLed', async () => {
      await newSession();
      const c = rawCdp(agentUrl, token);
      await c.send('Browser.getVersion');
      process.kill(chromePid, 'SIGKILL');
      expect(await c.ended).to.match(/browser exited \(signal SIGKILL\)/);
    });

    it('keeps a session with an open stream from the orphan reaper; once it closes, the session is reaped', async () => {
      await newSession();
      const c = rawCdp(agentUrl, token);
      await c.send('Browser.getVersion');
      // more than twice the orphan time with no call but the open stream
      await new Promise((r) => setTimeout(r, 7000));
      const still = await Promise.race([c.ended.then((r) => `ended: ${r}`), c.send('Browser.getVersion').then((m) => (m.result ? 'answered' : JSON.stringify(m)))]);
      expect(still).to.equal('answered');
      c.stream.close();
      expect(await c.ended).to.equal('closed');
      // asked without the token, health does not count as seeing the session
      const bound = async (): Promise<boolean> => ((await (await fetch(`http://127.0.0.1:${agent.httpPort}/health`)).json()) as { session_bound: boolean }).session_bound;
      while (await bound()) await new Promise((r) => setTimeout(r, 250));
      token = '';
    });
  });
});
