// Issue 12: computer_plane's page facts come from the browser's DevTools events,
// never from the page. The fingerprint page (the gateway's own detection
// checks) reports the same results with page facts on and off, and with them on
// every xdotool reply carries the active tab's URL, title, status and load
// state; with them off, none.
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import sharp from 'sharp';
import type { AddressInfo } from 'node:net';
import { connectPlane, type PlaneSession } from '../../gateway/planes/index.ts';
import { FINGERPRINT_PAGE } from '../../gateway/routes/fingerprint-page.ts';
import { startAgentProcess, waitFor, type AgentProc } from './support.ts';

describe('computer_plane page facts (real agent, Xvfb, Chromium)', function () {
  this.timeout(120_000);
  let page: Server;
  let url: string;
  const results: Record<string, string[]> = {};

  before(async () => {
    page = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', server: 'fixture' }).end(FINGERPRINT_PAGE));
    page.listen(0, '127.0.0.1');
    await once(page, 'listening');
    url = `http://127.0.0.1:${(page.address() as AddressInfo).port}/fingerprint`;
  });
  after(() => page.close());

  for (const facts of ['1', '0']) {
    describe(`PLANE_PAGE_FACTS=${facts}`, () => {
      let agent: AgentProc;
      let s: PlaneSession;
      before(async () => {
        agent = await startAgentProcess('computer', { PLANE_PAGE_FACTS: facts, SERVICE_BEHAVIORAL_JITTER: '0' });
        s = connectPlane({ url: `http://127.0.0.1:${agent.httpPort}`, deadlineMs: 20_000 });
        await s.init({ tenant_id: 'acme', profile_id: `facts-${facts}`, run_id: `run-facts-${facts}`, enable_cdp: true, viewport: [1280, 720] });
        await s.xdotool(['key', 'ctrl+l']);
        await s.xdotool(['type', '--delay', '1', url]);
        await s.xdotool(['key', 'Return']);
      });
      after(async () => {
        if (s?.token) await s.close().catch(() => undefined);
        s?.disconnect();
        await agent?.stop();
      });

      it(facts === '1' ? 'reports URL, title, status, headers and load state on xdotool replies' : 'adds nothing to the replies', async () => {
        if (facts === '1') {
          // about:blank is 'complete' too: on a loaded host the typed navigation may not have begun yet
          const ok = await waitFor(async () => ((p) => p?.url === url && p.load_state === 'complete')((await s.xdotool(['getmouselocation'])).page), 15_000);
          expect(ok, 'the page loaded').to.equal(true);
          const f = (await s.xdotool(['getmouselocation'])).page!;
          expect(f.url).to.equal(url);
          expect(f.title).to.equal('runplane fingerprint check');
          expect(f.status).to.equal(200);
          expect(f.headers.server).to.equal('fixture');
          expect(f.nav_error).to.equal(null);
          expect(f.nav_seq).to.be.at.least(1);
        } else {
          expect((await s.xdotool(['getmouselocation'])).page).to.equal(undefined);
        }
      });

      it('lets the fingerprint page run its checks', async () => {
        const read = async () => JSON.parse((await s.cdp("JSON.stringify(Array.from(document.querySelectorAll('tr.fp-row')).map((r) => r.textContent))")).result_json) as string;
        expect(await waitFor(async () => (JSON.parse(await read()) as string[]).length > 5, 15_000), 'the checks ran').to.equal(true);
        results[facts] = JSON.parse(await read()) as string[];
      });
    });
  }

  describe('screenshots read nothing in the page', () => {
    // A page that counts every read of the properties a script-based scroll or
    // visibility probe would touch: a screenshot must leave the count at 0 and
    // still report how far the page is scrolled (read from the layout).
    const WATCH_PAGE = `<!doctype html><title>watch</title><body style="margin:0">
<div style="height:6000px;background:linear-gradient(#fff,#ccc)">tall</div>
<script>
window.__reads = 0;
const vis = Object.getOwnPropertyDescriptor(Document.prototype, 'visibilityState');
Object.defineProperty(Document.prototype, 'visibilityState', { configurable: true, get() { window.__reads++; return vis.get.call(this); } });
for (const name of ['scrollY', 'pageYOffset']) {
  const d = Object.getOwnPropertyDescriptor(window, name) || Object.getOwnPropertyDescriptor(Window.prototype, name);
  Object.defineProperty(window, name, { configurable: true, get() { window.__reads++; return d.get.call(window); } });
}
</script></body>`;
    const RED_PAGE = '<!doctype html><title>red</title><body style="margin:0;background:#f00"></body>';
    let watch: Server;
    let agent: AgentProc;
    let s: PlaneSession;
    before(async () => {
      watch = createServer((req, res) => res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(req.url === '/red' ? RED_PAGE : WATCH_PAGE));
      watch.listen(0, '127.0.0.1');
      await once(watch, 'listening');
      agent = await startAgentProcess('computer', { SERVICE_BEHAVIORAL_JITTER: '0' });
      s = connectPlane({ url: `http://127.0.0.1:${agent.httpPort}`, deadlineMs: 20_000 });
      await s.init({ tenant_id: 'acme', profile_id: 'watch', run_id: 'run-watch', enable_cdp: true, viewport: [1280, 720] });
      await s.xdotool(['key', 'ctrl+l']);
      await s.xdotool(['type', '--delay', '1', `http://127.0.0.1:${(watch.address() as AddressInfo).port}/watch`]);
      await s.xdotool(['key', 'Return']);
      expect(await waitFor(async () => (await s.xdotool(['getmouselocation'])).page?.title === 'watch', 15_000), 'the page loaded').to.equal(true);
    });
    after(async () => {
      if (s?.token) await s.close().catch(() => undefined);
      s?.disconnect();
      await agent?.stop();
      watch?.close();
    });

    it('reports scroll_y from the layout without a script read', async () => {
      const top = await s.screenshot();
      expect(top.scroll_y).to.equal(0);
      await s.xdotool(['mousemove', '640', '400']);
      await s.xdotool(['click', '--repeat', '10', '--delay', '10', '5']);
      expect(await waitFor(async () => (await s.screenshot()).scroll_y > 0, 10_000), 'the page scrolled').to.equal(true);
      await s.screenshot();
      const reads = JSON.parse((await s.cdp('window.__reads')).result_json) as number;
      expect(reads, 'reads of visibilityState/scrollY made by the plane').to.equal(0);
    });

    it('says where on the screenshot the page is drawn: below the toolbar, the whole viewport, and only the page', async () => {
      await s.xdotool(['key', 'ctrl+l']);
      await s.xdotool(['type', '--delay', '1', `http://127.0.0.1:${(watch.address() as AddressInfo).port}/red`]);
      await s.xdotool(['key', 'Return']);
      expect(await waitFor(async () => (await s.xdotool(['getmouselocation'])).page?.title === 'red', 15_000), 'the page loaded').to.equal(true);
      // the page is painted a moment after its title is known
      const read = async () => {
        const shot = await s.screenshot('png');
        const { data, info } = await sharp(shot.image).removeAlpha().raw().toBuffer({ resolveWithObject: true });
        const red = (x: number, y: number) => {
          const i = (y * info.width + x) * info.channels;
          return data[i]! > 200 && data[i + 1]! < 60 && data[i + 2]! < 60;
        };
        return { shot, red };
      };
      let got = await read();
      expect(await waitFor(async () => (got = await read()).red(640, 700), 10_000), 'the red page painted').to.equal(true);
      const { shot, red } = got;
      const area = shot.page?.content;
      expect(area, JSON.stringify(shot.page)).to.be.an('object');
      const inner = JSON.parse((await s.cdp('JSON.stringify([innerWidth, innerHeight])')).result_json) as string;
      const [iw, ih] = JSON.parse(inner) as number[];
      // the area is the page's viewport (Chromium may size its window a pixel short of the screen); the browser's own strip is above it
      expect(area!.height).to.equal(ih);
      expect(area!.width).to.equal(iw);
      expect(area!.y, 'a toolbar above the page').to.be.above(30);
      const { x, y, width, height } = area!;
      const row = (at: number) => [x, x + (width >> 1), x + width - 1].every((px) => red(px, at));
      expect(row(y), 'the first row of the area is the page').to.equal(true);
      expect(row(y + height - 1), 'the last row of the area is the page').to.equal(true);
      expect(row(y - 1), 'the row above it is the browser').to.equal(false);
    });
  });

  // a describe after the two above, so it runs after them
  describe('with and without', () => {
    it('the fingerprint results are the same with and without page facts', () => {
      expect(results['1']).to.be.an('array').with.length.above(5);
      expect(results['1']).to.deep.equal(results['0']);
    });
  });
});
