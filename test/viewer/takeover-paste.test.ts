// Issue 42 on computer_plane: text beyond the display's US keyboard reaches the page
// through xdotool (agents/computer/keymap.ts binds its characters first). A run asks
// for a person; the person opens the link in real Chromium, clicks the field on the
// live screen, pastes "café ✓" and presses a "ü" key on their own layout, then Done;
// the page's field holds exactly that, and the run goes on. Real gateway,
// computer_plane agent (Xvfb, xdotool, Chromium).
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'puppeteer-core';
import { RUNNER_ENV, newToken, startGateway, until, type TestGateway } from '../support/gateway.ts';
import { launchTestBrowser } from '../support/browser.ts';
import { liveScreen } from '../support/live-screen.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

// the field reports every value it takes, numbered (the reports race each other over the
// browser's connections: arrival order is not the order of the values), and the keys pressed
// in it (an input method's text, as DevTools' insertText, comes without keys)
const PAGE = `<!doctype html><html><head><meta charset="utf-8"><title>note</title></head><body style="margin:0">
<input id="f" autocomplete="off" style="position:absolute;left:40px;top:40px;width:400px;height:40px;font-size:20px">
<script>
const f = document.getElementById('f');
let n = 0;
f.addEventListener('input', (e) => { fetch('/value', { method: 'POST', body: (n += 1) + ':' + e.target.value }); });
f.addEventListener('keydown', (e) => { fetch('/key', { method: 'POST', body: e.key }); });
</script>
</body></html>`;

describe('computer_plane: a person pastes and types characters beyond the US keyboard through the takeover page (xdotool, real Chromium)', function () {
  this.timeout(240_000);
  let gw: TestGateway;
  let site: Server;
  let siteUrl: string;
  let browser: Browser;
  /** the values the field took, in the order it took them */
  const values: string[] = [];
  const keys: string[] = [];
  const latest = (): string | undefined => values.findLast((v) => v !== undefined);
  const token = newToken();

  before(async () => {
    site = createServer((req, res) => {
      if (req.method === 'POST' && (req.url === '/value' || req.url === '/key')) {
        let raw = '';
        req.setEncoding('utf8');
        req.on('data', (c: string) => (raw += c));
        req.on('end', () => {
          if (req.url === '/key') keys.push(raw);
          else {
            const at = raw.indexOf(':');
            values[Number(raw.slice(0, at)) - 1] = raw.slice(at + 1);
          }
          res.end();
        });
        return;
      }
      res.setHeader('Content-Type', 'text/html; charset=utf-8');
      res.end(PAGE);
    });
    await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
    siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    gw = await startGateway({ env: { ...RUNNER_ENV, SERVICE_TAKEOVER_SECONDS: '120' }, keys: { [token]: { tenant_id: 'acme', rate_limit_per_minute: 0 } } });
    browser = await launchTestBrowser();
  });
  after(async () => {
    await browser?.close();
    await gw?.close();
    await new Promise((r) => site?.close(r));
  });

  it('the field holds "café ✓ü" exactly: the paste and the key went through xdotool, and the run goes on', async () => {
    const plan = [
      { intent: 'open the note', type: 'navigate', url: `${siteUrl}/`, required: true },
      { intent: 'write the note', type: 'request_human', params: { message: 'Paste the note, then Done' } },
      { intent: 'let the page settle', type: 'wait', seconds: 0.2 },
    ];
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: true, compute_backend: 'computer_plane' } });
    expect(r.status, r.text).to.equal(200);
    const id = r.body.run_id as string;
    let ask: Body | undefined;
    expect(await until(async () => !!(ask = ((await gw.req('GET', `/v1/runs/${id}/events`, { token })).body.events as Body[]).find((e) => e.type === 'takeover_requested')?.data as Body | undefined), 120_000), 'takeover_requested').to.equal(true);

    const tab = await browser.newPage();
    await tab.setViewport({ width: 1400, height: 1000 });
    await tab.goto(ask!.link as string);
    const at = await liveScreen(tab);
    // the field's middle, (240, 60) of the run's page; the click also focuses the screen
    await tab.mouse.click(...at(240, 60));
    await tab.evaluate(`(() => {
      const dt = new DataTransfer();
      dt.setData('text/plain', 'café ✓');
      document.querySelector('#live-screen').dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
    })()`);
    expect(await until(async () => latest() === 'café ✓', 30_000), `the page's value after the paste: ${JSON.stringify(latest())}`).to.equal(true);
    // a key of the person's own layout that the display's US keyboard lacks (a German keyboard's ü, on its BracketLeft key)
    await tab.evaluate(`(() => {
      const s = document.querySelector('#live-screen');
      for (const type of ['keydown', 'keyup']) s.dispatchEvent(new KeyboardEvent(type, { key: 'ü', code: 'BracketLeft', bubbles: true, cancelable: true }));
    })()`);
    expect(await until(async () => latest() === 'café ✓ü', 30_000), `the page's value after the key: ${JSON.stringify(latest())}`).to.equal(true);
    await tab.click('#takeover-done');
    await tab.waitForSelector('#takeover-title');
    await tab.close();

    let run: Body = {};
    expect(await until(async () => ['succeeded', 'failed', 'cancelled'].includes((run = (await gw.req('GET', `/v1/runs/${id}`, { token })).body).status), 90_000), 'run ended').to.equal(true);
    expect(run.status, JSON.stringify(run.failure_help)).to.equal('succeeded');
    // each character was a key press on the display (xdotool), not text put in by the browser
    for (const c of ['c', 'é', '✓', 'ü']) expect(keys, JSON.stringify(keys)).to.include(c);
    // every value the field took was a prefix of the text: nothing lost, nothing out of order
    for (const v of values) expect(v !== undefined && 'café ✓ü'.startsWith(v), JSON.stringify(values)).to.equal(true);
  });
});
