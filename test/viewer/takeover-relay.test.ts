// Issue 42: a person acts on a live page through the viewer. Real Chromium plays the
// person (puppeteer-core on the viewer's page), a real gateway relays to real local
// agents on both planes, and a fixture page reports what it saw: the click on its
// field at the right place, text typed with a chord (Ctrl+A) and Enter, a paste, a
// wheel that scrolls it. A watcher (status scope) sees the screen and relays nothing;
// a status-scope token cannot take control; another tenant's session is 404; hostile
// messages are answered and close nothing; the takeover link's page claims, shows the
// screen over the claim's socket and hands the page back with Done.
import { expect } from 'chai';
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import WebSocket from 'ws';
import { message, upgrade } from '../support/ws-client.ts';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { newToken, startGateway, type TestGateway } from '../support/gateway.ts';
import { startInputSite, type InputSite, type Seen } from '../support/input-site.ts';
import { launchTestBrowser, snapshot } from '../support/browser.ts';
import type { LiveTarget, TakeoverTargets } from '../../gateway/takeover/live-target.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('the live screen and the input relay: a person acts on a page through the viewer (real Chromium, both planes)', function () {
  this.timeout(420_000);
  let gw: TestGateway;
  let pad: InputSite;
  let browser: Browser;
  let page: Page;
  const operator = newToken();
  const watcher = newToken();
  const other = newToken();
  const sessions: Record<string, Body> = {};

  before(async () => {
    pad = await startInputSite();
    gw = await startGateway({
      env: { SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1' },
      keys: {
        [operator]: { tenant_id: 'alpha', scopes: ['run', 'status', 'result', 'logs', 'operator'], rate_limit_per_minute: 0, max_concurrent_runs: 4 },
        [watcher]: { tenant_id: 'alpha', scopes: ['status', 'result', 'logs'], rate_limit_per_minute: 0 },
        [other]: { tenant_id: 'beta', scopes: ['run', 'status', 'result', 'logs', 'operator'], rate_limit_per_minute: 0 },
      },
    });
    for (const plane of ['dom_plane', 'computer_plane'] as const) {
      const r = await gw.req('POST', '/v1/sessions', { token: operator, body: { compute_backend: plane, keep_alive: true, idle_timeout_seconds: 600 } });
      expect(r.status, r.text).to.equal(200);
      sessions[plane] = r.body as Body;
      await showPad(plane);
    }
    browser = await launchTestBrowser();
    page = await browser.newPage();
  });
  after(async () => {
    await browser?.close();
    for (const s of Object.values(sessions)) await gw?.req('DELETE', `/v1/sessions/${s.session_id}`, { token: operator }).catch(() => undefined);
    await gw?.close();
    await pad?.close();
  });

  /** A client puts a fresh fixture page on the session's screen (unscrolled, no menu open), then leaves it (kept alive). */
  const showPad = async (plane: string, path = '/pad') => {
    const client = await puppeteer.connect({ browserWSEndpoint: sessions[plane]!.cdp_url as string, headers: { 'X-Service-Token': operator }, defaultViewport: null });
    const pages = await client.pages();
    const tab = pages.find((p) => p.browserContext() !== client.defaultBrowserContext()) ?? pages[0]!;
    await tab.goto(`${pad.url}${path}`);
    await tab.bringToFront();
    await client.disconnect();
  };

  const signIn = async (token: string) => {
    await page.goto(`${gw.url}/ui/`);
    await page.evaluate('sessionStorage.clear()');
    await page.goto(`${gw.url}/ui/`);
    await page.waitForSelector('#token');
    await page.type('#token', token);
    await page.click('form.signin button');
    await page.waitForSelector('table.runs');
  };

  /** Opens a session's live screen and waits for its first frame; answers where a page point is on the viewer's screen. */
  const openLive = async (id: string) => {
    // from the session's page, by its link
    await page.evaluate(`location.hash = '#/sessions/${id}'`);
    await page.waitForSelector('#open-live');
    await page.click('#open-live');
    await page.waitForFunction("Number(document.querySelector('#live-screen')?.dataset.frames ?? 0) > 0", { timeout: 30_000 });
    return async (x: number, y: number): Promise<[number, number]> => {
      const box = (await (await page.$('#live-screen'))!.boundingBox())!;
      const [w, h] = await page.$eval('#live-screen', (c) => [(c as unknown as { width: number }).width, (c as unknown as { height: number }).height]);
      return [box.x + ((x + 0.5) * box.width) / w, box.y + ((y + 0.5) * box.height) / h];
    };
  };

  const near = (s: Seen, x: number, y: number) => Math.abs(s.x! - x) <= 2 && Math.abs(s.y! - y) <= 2;

  for (const plane of ['dom_plane', 'computer_plane'] as const) {
    it(`${plane}: the person clicks the field on the live screen, types with a chord and Enter, pastes and scrolls; the page saw each at the right place`, async () => {
      const s = sessions[plane]!;
      await signIn(operator);
      const at = await openLive(s.session_id as string);
      expect(await page.$eval('#live-screen', (c) => (c as unknown as { dataset: Record<string, string> }).dataset.mode)).to.equal('control');
      expect(await page.$eval('#live-mode', (e) => e.textContent)).to.equal('You control this page.');
      // the field's middle: (300, 120) in the page's CSS pixels
      const clicked = pad.next((e) => e.kind === 'click');
      await page.mouse.click(...(await at(300, 120)));
      const click = await clicked;
      expect(click.target, JSON.stringify(click)).to.equal('field');
      expect(near(click, 300, 120), JSON.stringify(click)).to.equal(true);
      // typing: the canvas took the focus with the click; text, then Ctrl+A and new text replaces it
      await page.mouse.click(...(await at(300, 120)));
      let typed = pad.next((e) => e.kind === 'input' && e.value === 'hello');
      await page.keyboard.type('hello');
      await typed;
      typed = pad.next((e) => e.kind === 'input' && e.value === 'Bye!');
      await page.keyboard.down('Control');
      await page.keyboard.press('a');
      await page.keyboard.up('Control');
      await page.keyboard.type('Bye!');
      await typed;
      const chord = pad.seen.find((e) => e.kind === 'keydown' && e.key === 'a' && e.ctrl);
      expect(chord, 'Ctrl+A reached the page as a chord').to.not.equal(undefined);
      const entered = pad.next((e) => e.kind === 'keydown' && e.key === 'Enter' && e.target === 'field');
      await page.keyboard.press('Enter');
      await entered;
      typed = pad.next((e) => e.kind === 'input' && e.value === 'Bye');
      await page.keyboard.press('Backspace');
      await typed;
      // a paste: the browser's paste event on the focused screen brings the text, typed into the field
      typed = pad.next((e) => e.kind === 'input' && e.value === 'Bye pasted ünïcode');
      await page.evaluate(`(() => {
        const dt = new DataTransfer();
        dt.setData('text/plain', ' pasted ünïcode');
        document.querySelector('#live-screen').dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
      })()`);
      await typed;
      // the wheel over the page at (640, 500) scrolls it down
      const wheeled = pad.next((e) => e.kind === 'wheel');
      const scrolled = pad.next((e) => e.kind === 'scroll' && (e.scroll_y ?? 0) > 0);
      await page.mouse.move(...(await at(640, 500)));
      await page.mouse.wheel({ deltaY: 300 });
      const wheel = await wheeled;
      expect(wheel.dy).to.be.above(0);
      expect(near(wheel, 640, 500), JSON.stringify(wheel)).to.equal(true);
      await scrolled;
      await snapshot(page, `takeover-live-${plane}`);
      // a right-button press on the green target (fixed on the page, so where the scroll left it)
      const pressed = pad.next((e) => e.kind === 'mousedown' && e.button === 2);
      await page.mouse.click(...(await at(700, 360)), { button: 'right' });
      const press = await pressed;
      expect(press.target, JSON.stringify(press)).to.equal('target');
      expect(near(press, 700, 360), JSON.stringify(press)).to.equal(true);
    });
  }

  it('a watcher (status scope, no operator) sees the screen and relays nothing: every input is refused', async () => {
    const s = sessions.dom_plane!;
    await showPad('dom_plane');
    await signIn(watcher);
    const at = await openLive(s.session_id as string);
    expect(await page.$eval('#live-screen', (c) => (c as unknown as { dataset: Record<string, string> }).dataset.mode)).to.equal('watch');
    expect(await page.$eval('#live-mode', (e) => e.textContent)).to.match(/^Watch only/);
    const before = pad.seen.length;
    await page.mouse.click(...(await at(300, 120)));
    await page.keyboard.type('nope');
    // the page binds no input on a watch-only screen; a socket that sends anyway is refused (below)
    const r = await gw.req('POST', `/v1/sessions/${s.session_id}/live-ticket`, { token: watcher, body: {} });
    expect(r.status, r.text).to.equal(200);
    expect(r.body.control).to.equal(false);
    const sock = await upgrade(`${gw.url.replace('http', 'ws')}/v1/sessions/${s.session_id}/live`, {}, r.body.protocol as string[]);
    expect(sock.status).to.equal(101);
    const hello = await message(sock.ws!, (m) => m.type === 'hello');
    expect(hello.control).to.equal(false);
    const refused = message(sock.ws!, (m) => m.type === 'error');
    sock.ws!.send(JSON.stringify({ type: 'mouse', action: 'down', x: 300, y: 120, seq: 7 }));
    expect(await refused).to.deep.equal({ type: 'error', detail: 'this screen is read-only: inputs are not relayed', seq: 7 });
    // the fence: an operator's click reaches the page after all that, and nothing before it did
    const op = await upgrade(`${gw.url.replace('http', 'ws')}/v1/sessions/${s.session_id}/live`, { 'X-Service-Token': operator });
    await message(op.ws!, (m) => m.type === 'hello' && m.control === true);
    const fence = pad.next((e) => e.kind === 'click');
    op.ws!.send(JSON.stringify({ type: 'mouse', action: 'down', x: 700, y: 360 }));
    op.ws!.send(JSON.stringify({ type: 'mouse', action: 'up', x: 700, y: 360 }));
    await fence;
    expect(pad.seen.slice(before).map((e) => e.kind)).to.deep.equal(['mousedown', 'click']);
    sock.ws!.close();
    op.ws!.close();
  });

  it('a status-scope token cannot take control; another tenant gets 404; no credential, a used ticket or an ended session is refused', async () => {
    const s = sessions.dom_plane!;
    const url = `${gw.url.replace('http', 'ws')}/v1/sessions/${s.session_id}/live`;
    const ask = await gw.req('POST', `/v1/sessions/${s.session_id}/live-ticket`, { token: watcher, body: { control: true } });
    expect(ask.status).to.equal(403);
    expect(ask.body.detail).to.match(/operator/);
    expect((await gw.req('POST', `/v1/sessions/${s.session_id}/live-ticket`, { token: other, body: {} })).status).to.equal(404);
    expect((await upgrade(url, { 'X-Service-Token': other })).status).to.equal(404);
    expect((await upgrade(url)).status).to.equal(401);
    const t = (await gw.req('POST', `/v1/sessions/${s.session_id}/live-ticket`, { token: operator, body: {} })).body as Body;
    expect(t.control).to.equal(true);
    const first = await upgrade(url, {}, t.protocol as string[]);
    expect(first.status).to.equal(101);
    first.ws!.close();
    expect((await upgrade(url, {}, t.protocol as string[])).status, 'a ticket opens one socket').to.equal(401);
    // a ticket for one session does not open another
    const t2 = (await gw.req('POST', `/v1/sessions/${s.session_id}/live-ticket`, { token: operator, body: {} })).body as Body;
    expect((await upgrade(url.replace(s.session_id as string, sessions.computer_plane!.session_id as string), {}, t2.protocol as string[])).status).to.equal(401);
    // a watcher's header token gets a read-only socket
    const w = await upgrade(url, { 'X-Service-Token': watcher });
    expect((await message(w.ws!, (m) => m.type === 'hello')).control).to.equal(false);
    w.ws!.close();
    for (const bad of ['ses_nope', '..%2F..', 'ses_' + 'a'.repeat(32)]) expect((await upgrade(`${gw.url.replace('http', 'ws')}/v1/sessions/${bad}/live`, { 'X-Service-Token': operator })).status, bad).to.equal(404);
  });

  it('hostile messages are answered with an error and close nothing; the relay goes on', async () => {
    const s = sessions.dom_plane!;
    const sock = await upgrade(`${gw.url.replace('http', 'ws')}/v1/sessions/${s.session_id}/live`, { 'X-Service-Token': operator });
    const ws = sock.ws!;
    await message(ws, (m) => m.type === 'hello');
    const hostile: Array<[string | Buffer, RegExp]> = [
      ['not json', /one JSON object/],
      ['[1,2]', /one JSON object/],
      [JSON.stringify({ type: 'teleport' }), /type must be/],
      [JSON.stringify({ type: 'mouse', action: 'down', x: -5, y: 10 }), /^x: /],
      [JSON.stringify({ type: 'mouse', action: 'down', x: 5, y: 10, button: 'fourth' }), /^button: /],
      [JSON.stringify({ type: 'mouse', action: 'down', x: 99999, y: 10 }), /^x: /],
      [JSON.stringify({ type: 'mouse', action: 'move', x: 5000, y: 10 }), /outside the page/],
      [JSON.stringify({ type: 'key', action: 'down', key: 'a'.repeat(33), code: 'KeyA' }), /^key: /],
      [JSON.stringify({ type: 'key', action: 'down', key: 'a', code: 'Key A;rm' }), /^code: /],
      [JSON.stringify({ type: 'key', action: 'down', key: 'a', code: 'KeyA', modifiers: ['Hyper'] }), /^modifiers\/0: /],
      [JSON.stringify({ type: 'paste', text: '' }), /^text: /],
      [JSON.stringify({ type: 'paste', text: 'x'.repeat(10_001) }), /^text: /],
      [JSON.stringify({ type: 'wheel', x: 1, y: 1, dx: 0, dy: 1e9 }), /^dy: /],
      [JSON.stringify({ type: 'mouse', action: 'down', x: 1, y: 1, __proto__: { x: 1 }, extra: true }), /extra/],
      ['x'.repeat(70_000), /at most/],
      [Buffer.from([1, 2, 3]), /JSON text/],
    ];
    for (const [raw, want] of hostile) {
      const answer = message(ws, (m) => m.type === 'error');
      ws.send(raw);
      expect((await answer).detail, String(raw).slice(0, 60)).to.match(want);
    }
    expect(ws.readyState).to.equal(WebSocket.OPEN);
    // and it still relays
    const clicked = pad.next((e) => e.kind === 'click');
    ws.send(JSON.stringify({ type: 'mouse', action: 'down', x: 700, y: 360 }));
    ws.send(JSON.stringify({ type: 'mouse', action: 'up', x: 700, y: 360 }));
    // where the page is now (the tests before scrolled it): the point the message named
    expect(near(await clicked, 700, 360)).to.equal(true);
    ws.close();
  });

  it('the takeover link: 404 without a provider; with one, the page claims, shows the screen on the claim socket, relays, and Done posts the claim', async () => {
    const s = sessions.computer_plane!;
    await showPad('computer_plane');
    const tko = 'tko_' + '1'.repeat(32);
    const claim = 'C'.repeat(43);
    const url = `${gw.url.replace('http', 'ws')}/v1/takeover/${tko}/live`;
    expect((await upgrade(url, {}, ['runplane.v1', `runplane.claim.${claim}`])).status, 'no provider configured').to.equal(404);
    // the run side's stand-in: the session's own plane, as a takeover record would name a waiting run's
    const ep = gw.gateway.services.sessions.endpointOf(await gw.gateway.services.sessions.get((await gw.gateway.services.tenants.resolve(operator))!, s.session_id as string), { secret: undefined })!;
    const recorded: Body[] = [];
    const provider: TakeoverTargets = {
      target: async (id, c) => (id === tko && c === claim ? ({ endpoint: { url: ep.url, token: ep.token, secret: ep.secret }, backend: 'computer_plane', viewport: { width: 1280, height: 720 } } satisfies LiveTarget) : null),
      recordInput: (_id, summary) => void recorded.push(summary as unknown as Body),
    };
    gw.gateway.services.takeoverTargets = provider;
    expect((await upgrade(url, {}, ['runplane.v1', `runplane.claim.${'D'.repeat(43)}`])).status, 'a wrong claim').to.equal(404);
    expect((await upgrade(url, {}, ['runplane.v1'])).status, 'no claim').to.equal(401);
    // the claim and Done routes are the run side's (branch takeover-core): answered here as it will
    const posted: Array<{ url: string; claim: string | undefined; body: string | undefined }> = [];
    const tab = await browser.newPage();
    await tab.setRequestInterception(true);
    tab.on('request', (r) => {
      const u = new URL(r.url());
      if (u.pathname === '/v1/takeover/claim' || u.pathname.startsWith('/v1/takeover/tko_')) {
        posted.push({ url: u.pathname, claim: r.headers()['x-takeover-claim'], body: r.postData() });
        const body = u.pathname === '/v1/takeover/claim' ? { takeover_id: tko, claim, run_id: 'run_x', message: 'Type the code we sent you', expires_at: new Date(Date.now() + 600_000).toISOString(), backend: 'computer_plane', viewport: { width: 1280, height: 720 } } : { takeover_id: tko, status: 'done' };
        return void r.respond({ status: 200, contentType: 'application/json', body: JSON.stringify(body) });
      }
      void r.continue();
    });
    await tab.goto(`${gw.url}/ui/takeover#${'T'.repeat(43)}`);
    await tab.waitForFunction("Number(document.querySelector('#live-screen')?.dataset.frames ?? 0) > 0", { timeout: 30_000 });
    expect(new URL(tab.url()).hash, 'the token leaves the address bar').to.equal('');
    expect(await tab.$eval('#takeover-message', (e) => e.textContent)).to.equal('The run asks: Type the code we sent you');
    expect(posted[0]).to.deep.equal({ url: '/v1/takeover/claim', claim: undefined, body: JSON.stringify({ token: 'T'.repeat(43) }) });
    const box = (await (await tab.$('#live-screen'))!.boundingBox())!;
    const [w, h] = await tab.$eval('#live-screen', (c) => [(c as unknown as { width: number }).width, (c as unknown as { height: number }).height]);
    const typed = pad.next((e) => e.kind === 'input' && (e.value ?? '').endsWith('424242'));
    await tab.mouse.click(box.x + (300.5 * box.width) / w, box.y + (120.5 * box.height) / h);
    await tab.keyboard.type('424242');
    await typed;
    expect(recorded.some((r) => r.kind === 'mouse' && r.action === 'down' && r.x === 300 && r.y === 120)).to.equal(true);
    // what was typed is in the record as lengths only
    expect(recorded.filter((r) => r.kind === 'key').every((r) => r.key === undefined && r.text_length === 1)).to.equal(true);
    expect(JSON.stringify(recorded)).to.not.include('424242');
    // the keyboard's way out of the screen: Ctrl+] goes to the note, Shift+Tab back to the screen
    await tab.keyboard.down('Control');
    await tab.keyboard.press(']');
    await tab.keyboard.up('Control');
    expect(await tab.evaluate('document.activeElement.id')).to.equal('takeover-note');
    await tab.keyboard.down('Shift');
    await tab.keyboard.press('Tab');
    await tab.keyboard.up('Shift');
    expect(await tab.evaluate('document.activeElement.id')).to.equal('live-screen');
    await tab.focus('#takeover-note');
    await tab.type('#takeover-note', 'code typed');
    await tab.click('#takeover-done');
    await tab.waitForSelector('section.takeover.refused, #takeover-title');
    expect(await tab.$eval('#takeover-title', (e) => e.textContent)).to.equal('Thank you: the run goes on');
    expect(posted.at(-1)).to.deep.equal({ url: `/v1/takeover/${tko}/done`, claim, body: JSON.stringify({ note: 'code typed' }) });
    await tab.close();
  });

  it('the takeover link refused: 409 already opened and 410 expired each get a clear page', async () => {
    for (const [status, title] of [[409, 'This link was already opened'], [410, 'This link expired']] as const) {
      const tab = await browser.newPage();
      await tab.setRequestInterception(true);
      tab.on('request', (r) => {
        if (new URL(r.url()).pathname === '/v1/takeover/claim') return void r.respond({ status, contentType: 'application/json', body: JSON.stringify({ detail: 'refused' }) });
        void r.continue();
      });
      await tab.goto(`${gw.url}/ui/takeover#${'U'.repeat(43)}`);
      await tab.waitForSelector('#takeover-title');
      expect(await tab.$eval('#takeover-title', (e) => e.textContent)).to.equal(title);
      expect(await tab.$('#live-screen')).to.equal(null);
      await tab.close();
    }
  });

  it('a viewer that does not read its socket is skipped frames, not buffered without end, and not dropped', async () => {
    const s = sessions.dom_plane!;
    await showPad('dom_plane', '/noise');
    const sock = await upgrade(`${gw.url.replace('http', 'ws')}/v1/sessions/${s.session_id}/live?control=0`, { 'X-Service-Token': operator });
    const ws = sock.ws!;
    await message(ws, (m) => m.type === 'frame');
    const tcp = (ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
    // noise frames (hundreds of KB each) while the viewer reads nothing: the kernel's buffers fill, then the gateway's
    tcp.pause();
    await new Promise((r) => setTimeout(r, 10_000));
    tcp.resume();
    const late = await message(ws, (m) => m.type === 'frame' && m.skipped > 0, 30_000);
    expect(late.skipped).to.be.above(0);
    expect(ws.readyState).to.equal(WebSocket.OPEN);
    ws.close();
    await showPad('dom_plane');
  });

  it('a session released while its screen is open: the viewer is told why and the socket closes; a new one is 409', async () => {
    const s = sessions.dom_plane!;
    const url = `${gw.url.replace('http', 'ws')}/v1/sessions/${s.session_id}/live`;
    const sock = await upgrade(url, { 'X-Service-Token': operator });
    await message(sock.ws!, (m) => m.type === 'hello');
    const closed = new Promise<number>((resolve) => sock.ws!.on('close', (code) => resolve(code)));
    expect((await gw.req('DELETE', `/v1/sessions/${s.session_id}`, { token: operator })).body.status).to.equal('ended');
    // a control socket is one of the session's clients: its end closes it at once, saying why
    expect((await message(sock.ws!, (m) => m.type === 'ended', 30_000)).detail).to.match(/released/);
    expect(await closed).to.equal(1000);
    const again = await upgrade(url, { 'X-Service-Token': operator });
    expect(again.status).to.equal(409);
    expect(JSON.parse(again.body).detail).to.match(/^the session ended \(released\)/);
  });

  it('nothing the person typed or pasted is in the gateway\'s log or anywhere in its data dir', async () => {
    const secrets = ['hello', 'Bye!', 'pasted ünïcode', '424242'];
    const log = gw.logs.join('\n');
    for (const t of secrets) expect(log.includes(t), `log holds ${t}`).to.equal(false);
    expect(log).to.include('live screen opened');
    const files: string[] = [];
    const walk = async (d: string): Promise<void> => {
      for (const e of await readdir(d, { withFileTypes: true })) {
        if (e.isDirectory()) await walk(path.join(d, e.name));
        else if (e.isFile()) files.push(path.join(d, e.name));
      }
    };
    await walk(gw.dir);
    expect(files.length).to.be.above(3);
    for (const f of files) {
      const bytes = await readFile(f);
      for (const t of secrets) expect(bytes.includes(Buffer.from(t)), `${f} holds ${t}`).to.equal(false);
    }
  });
});
