// Issue 17, first slice: the viewer at /ui, driven in a real browser (Debian's
// Chromium via puppeteer-core) against a real gateway running real runs on the
// fixture site: sign-in (a bad token refused, the token never in a URL or a
// log), the runs list, a failed run's timeline with its failure help and
// "jump to failure", a live run updating without reload, and a second tenant
// seeing nothing of the first. Screenshots of the main views are saved as
// artefacts and checked not to be blank.
import { expect } from 'chai';
import { mkdtemp } from 'node:fs/promises';
import { existsSync, statSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import type { Browser, Page } from 'puppeteer-core';
import { RUNNER_ENV, newToken, sleep, startGateway, until, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';
import { launchTestBrowser, snapshot } from '../support/browser.ts';
import { startFakeModel, type FakeModel, fakeBrainsDir } from '../support/fake-model.ts';
import { createIngestApp } from '../../plugins/trace-ingest/app.ts';
import { DebugSession } from '../../sdk/index.ts';

const READER = { email: 'reader@alpha.test', password: 'pw-alpha-reader-0123456789' };


describe('the viewer (/ui) in a real browser, on a real gateway with real runs', function () {
  this.timeout(300_000);
  let gw: TestGateway;
  let site: Site;
  let fake: FakeModel;
  let browser: Browser;
  let page: Page;
  const alpha = newToken();
  const beta = newToken();
  const ids: Record<string, string> = {};

  before(async () => {
    [site, fake] = await Promise.all([startSite(), startFakeModel()]);
    // a brain on the fake model server, so a step has model calls to show
    const { dir, brainsPath: brains } = await fakeBrainsDir(fake, 'viewer', { 'default-cua': { protocol: 'openai-chat', base_url: fake.url, model: 'fake-default', price_per_mtok_in: 1, price_per_mtok_out: 2 } });
    // the trace service mounted in the gateway keeps its data here; a reader of tenant alpha exists before it starts
    const traceData = path.join(dir, 'trace-data');
    const pre = await createIngestApp({ dataDir: traceData });
    await pre.service.createTenant('alpha', { modelioEnabled: true });
    await pre.service.createUser(READER.email, READER.password, 'alpha');
    await pre.close();
    gw = await startGateway({
      dir,
      env: { ...RUNNER_ENV, SERVICE_BRAINS_PATH: brains, TRACE_DATA_DIR: traceData },
      keys: {
        [alpha]: { tenant_id: 'alpha', rate_limit_per_minute: 0, max_concurrent_runs: 3, default_compute_backend: 'dom_plane' },
        [beta]: { tenant_id: 'beta', rate_limit_per_minute: 0, max_concurrent_runs: 3, default_compute_backend: 'dom_plane' },
      },
    });
    const run = async (plan: unknown) => (await gw.req('POST', '/v1/predict', { token: alpha, body: { plan, detached: false } })).body;
    ids.ok = (await run([
      { intent: 'open the listings', type: 'navigate', url: `${site.url}/list?page=1` },
      { intent: 'read the cards', type: 'extract_data', extract: { schema_name: 'flats', item_selector: '.card', max_items: 10, fields: [{ name: 'title', type: 'str', selector: 'h2', required: true }, { name: 'price', type: 'float', selector: '.price' }] } },
      { intent: 'open the counter', type: 'navigate', url: `${site.url}/counter` },
      { intent: 'hit the counter', type: 'click', params: { selector: '#hit' } },
      { intent: 'press the hit button', type: 'default-cua', max_steps: 3 },
    ])).run_id;
    ids.failed = (await run([{ intent: 'open the static page', type: 'navigate', url: `${site.url}/static` }, { intent: 'open a page that is gone', type: 'navigate', url: `${site.url}/gone`, required: true }])).run_id;
    ids.fixed = (await run([{ intent: 'open the static page', type: 'navigate', url: `${site.url}/static` }, { intent: 'open the static page again', type: 'navigate', url: `${site.url}/static`, required: true }])).run_id;
    browser = await launchTestBrowser();
    page = await browser.newPage();
  });
  after(async () => {
    await browser?.close();
    await gw?.close();
    await site?.close();
    await fake?.close();
  });

  const signIn = async (token: string) => {
    await page.goto(`${gw.url}/ui/`);
    await page.waitForSelector('#token');
    await page.type('#token', token);
    await page.click('form.signin button');
  };
  const text = (sel: string) => page.$eval(sel, (el) => el.textContent ?? '');

  it('refuses a token that matches no tenant', async () => {
    await signIn('not-a-token');
    await page.waitForFunction("document.querySelector('.signin .error')?.textContent?.includes('matches no tenant')");
    expect(await page.$('table.runs')).to.equal(null);
  });

  it("signs in and lists the tenant's runs, newest first, with status", async () => {
    await signIn(alpha);
    await page.waitForSelector('table.runs tbody tr a');
    const rows = await page.$$eval('table.runs tbody tr', (trs) => trs.map((tr) => [tr.querySelector('a')?.textContent, tr.querySelector('.badge')?.textContent]));
    expect(rows).to.deep.equal([[ids.fixed, 'succeeded'], [ids.failed, 'failed'], [ids.ok, 'succeeded']]);
    expect(page.url()).to.not.include(alpha);
    await snapshot(page, 'runs-list');
  });

  it("opens a failed run: its steps, the failure help, and jump to failure", async () => {
    await page.click(`a[href="#/runs/${ids.failed}"]`);
    await page.waitForSelector('ol.steps li.step');
    expect(await text('#halt')).to.equal('navigate_failed');
    expect(await text('section.help h2')).to.include('navigate_failed');
    expect(await page.$$eval('ol.steps li.step', (lis) => lis.map((li) => li.classList.contains('failed')))).to.deep.equal([false, true]);
    await page.click('#jump');
    const focused = await page.evaluate('document.activeElement?.id');
    expect(focused).to.equal('step-1');
    expect(await text('#step-1 .badge')).to.equal('http_4xx');
    // the keyboard: k back to the first step, j forward, f to the failure again
    await page.keyboard.press('k');
    expect(await page.evaluate('document.activeElement?.id')).to.equal('step-0');
    await page.keyboard.press('j');
    expect(await page.evaluate('document.activeElement?.id')).to.equal('step-1');
    await page.keyboard.press('k');
    await page.keyboard.press('f');
    expect(await page.evaluate('document.activeElement?.id')).to.equal('step-1');
    await page.type('#step-search', 'gone');
    expect(await page.$$eval('ol.steps li.step', (lis) => lis.map((li) => li.hidden))).to.deep.equal([true, false]);
    await snapshot(page, 'failed-run');
  });

  it('opens a finished run: its rows as a table, and the recording tied to its steps', async () => {
    await page.goto(`${gw.url}/ui/#/runs/${ids.ok}`);
    await page.waitForSelector('#rows table.rows tbody tr');
    expect(await text('#rows h2')).to.equal('Rows (3)');
    // the run's cost (its brain step called the fake model) and each step's duration and verdict from the trace
    const life = (await gw.req('GET', `/v1/runs/${ids.ok}`, { token: alpha })).body;
    expect(life.cost_usd).to.be.above(0);
    expect(await text('#run-cost')).to.equal(`${life.cost_usd.toFixed(4)} USD`);
    expect(await text('#step-0 .meta')).to.match(/^\d+ ms · \d+\.\d{4} USD · verdict: passed$/);
    expect(await page.$$eval('#rows thead th', (ths) => ths.map((t) => t.textContent))).to.deep.equal(['title', 'price']);
    expect(await page.$('#rows-csv')).to.not.equal(null);
    await page.waitForSelector('#video');
    await page.waitForFunction("document.querySelector('#video').readyState >= 1", { timeout: 20_000 });
    const at = Number(await page.$eval('#step-2', (li) => (li as unknown as { dataset: { at: string } }).dataset.at));
    expect(at, 'the third step starts after the first two').to.be.above(0);
    // a DOM click: puppeteer's click aims at coordinates, and the list moves while the video's frame loads on a busy host
    await page.$eval('#step-2 .step-head', (el) => (el as unknown as { click(): void }).click());
    const video = (await page.evaluate(`(() => {
      const v = document.querySelector('#video');
      return { currentTime: v.currentTime, duration: v.duration, readyState: v.readyState, seekable: [...Array(v.seekable.length).keys()].map((i) => [v.seekable.start(i), v.seekable.end(i)]) };
    })()`)) as { currentTime: number; duration: number };
    expect(Math.abs(video.currentTime - at), `seek to ${at} s: ${JSON.stringify(video)}`).to.be.below(0.5);
    await snapshot(page, 'finished-run');
  });

  it("shows a click step's screenshots before and after, with the click point and the changed area", async () => {
    await page.click('#step-3 button.shots');
    await page.waitForSelector('#step-3 .pair img', { timeout: 20_000 });
    expect(await page.$$eval('#step-3 .pair figcaption', (fs) => fs.map((f) => f.textContent))).to.deep.equal(['Before', 'After']);
    expect(await page.$$('#step-3 .pair span.click')).to.have.length(2);
    expect(await page.$('#step-3 .pair span.changed'), 'the counter changed').to.not.equal(null);
    // the marker sits where the click landed, in the screenshot's own scale
    const { x, y } = (await gw.req('GET', `/v1/runs/${ids.ok}/result`, { token: alpha })).body.steps[3].last_action.params;
    const at = (await page.evaluate(`(() => {
      const img = document.querySelector('#step-3 .pair figure:last-child img').getBoundingClientRect();
      const dot = document.querySelector('#step-3 .pair figure:last-child span.click').getBoundingClientRect();
      return [(dot.left + dot.width / 2 - img.left) / img.width, (dot.top + dot.height / 2 - img.top) / img.height];
    })()`)) as [number, number];
    expect(at[0]).to.be.closeTo(x / 1280, 0.01);
    expect(at[1]).to.be.closeTo(y / 720, 0.01);
    await page.$eval('#step-3', (el) => (el as unknown as { scrollIntoView(): void }).scrollIntoView());
    await snapshot(page, 'before-after');
  });

  it("shows what a brain step asked the model and what it answered", async () => {
    await page.waitForSelector('#step-4 button.calls');
    await page.click('#step-4 button.calls');
    await page.waitForSelector('#step-4 details.call');
    const calls = await page.$$eval('#step-4 details.call summary', (ss) => ss.map((s) => s.textContent ?? ''));
    expect(calls.length).to.be.at.least(1);
    expect(calls[0]).to.match(/^planner · default-cua · \d+ in \/ \d+ out tokens/);
    expect(await text('#step-4 details.call pre')).to.include('press the hit button');
    expect(await page.$('#step-3 button.calls'), 'a mechanical step made no model call').to.equal(null);
  });

  it('exports the run as a ZIP with its record, summary, events, rows and screenshots', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-viewer-dl-'));
    const cdp = await page.createCDPSession();
    await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: dir });
    await page.click('#export');
    const file = path.join(dir, `run-${ids.ok}.zip`);
    expect(await until(async () => existsSync(file) && statSync(file).size > 0, 20_000), 'the ZIP was saved').to.equal(true);
    await sleep(300);
    execFileSync('unzip', ['-tq', file]);
    const names = execFileSync('unzip', ['-Z1', file], { encoding: 'utf8' }).trim().split('\n');
    expect(names).to.include.members(['run.json', 'result.json', 'events.json', 'extracted_rows.json', 'summary.md', 'screenshots/0003_pre.png', 'screenshots/0003_post.png']);
    const summary = execFileSync('unzip', ['-p', file, 'summary.md'], { encoding: 'utf8' });
    expect(summary).to.include(`# Run ${ids.ok}`).and.include('`steps[3]` click: hit the counter');
  });

  it('compares two runs step by step and marks the first divergence', async () => {
    await page.goto(`${gw.url}/ui/#/`);
    await page.waitForSelector(`input.pick[value="${ids.failed}"]`);
    await page.click(`input.pick[value="${ids.fixed}"]`);
    await page.click(`input.pick[value="${ids.failed}"]`);
    await page.click('#compare');
    await page.waitForSelector('table.compare tbody tr');
    expect(await page.$$eval('table.compare tbody tr td.path', (tds) => tds.map((t) => t.textContent))).to.deep.equal(['steps[0]', 'steps[1]']);
    expect(await text('#divergence td.path')).to.equal('steps[1]');
    expect(await text('#jump-divergence')).to.equal('First divergence: steps[1]');
    await snapshot(page, 'compare');
  });

  it('follows a running run live, without a reload, to its end', async () => {
    const r = await gw.req('POST', '/v1/predict', { token: alpha, body: { plan: [{ intent: 'open', type: 'navigate', url: `${site.url}/static` }, { intent: 'wait a little', type: 'wait', seconds: 3 }, { intent: 'open the counter', type: 'navigate', url: `${site.url}/counter` }, { intent: 'wait again', type: 'wait', seconds: 2 }], detached: true } });
    const id = r.body.run_id as string;
    await until(async () => (await gw.req('GET', `/v1/runs/${id}`, { token: alpha })).body.status === 'running', 30_000);
    await page.goto(`${gw.url}/ui/#/runs/${id}`);
    await page.waitForSelector('#events');
    const marker = await page.evaluate('window.marker = Math.random()');
    await page.waitForFunction("document.querySelectorAll('#events li').length > 0", { timeout: 30_000 });
    // a frame after a step that ends while the page watches, and the step on screen
    await page.waitForFunction("(document.querySelector('#frame')?.src ?? '').startsWith('data:image/')", { timeout: 30_000 });
    expect(await text('#current')).to.match(/^steps\[\d\] /);
    await page.waitForFunction("document.querySelector('h1 .badge')?.textContent === 'succeeded'", { timeout: 60_000 });
    expect(await page.evaluate('window.marker'), 'no reload').to.equal(marker);
    expect(await gw.req('GET', `/v1/runs/${id}`, { token: alpha }).then((x) => x.body.status)).to.equal('succeeded');
  });

  it('opens traces from the trace service: a run another SDK client recorded, and this gateway\'s own runs', async () => {
    // another client: a DSN minted by the reader, a session recorded with the SDK straight to the mounted ingest
    const login = await fetch(`${gw.url}/trace/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(READER) });
    expect(login.status).to.equal(200);
    const cookie = login.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
    const minted = (await (await fetch(`${gw.url}/trace/api/v1/tenant/dsns`, { method: 'POST', headers: { cookie, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'other-client' }) })).json()) as { dsn: string };
    const out = await mkdtemp(path.join(tmpdir(), 'runplane-viewer-sdk-'));
    const s = new DebugSession({ runId: 'sdk-run-1', clientName: 'other-client', outDir: out, dsn: minted.dsn, captureMode: 'full' });
    s.recordStep({ step_index: 0, step_id: 'open-home', status: 'passed', action: { type: 'CLICK', params: { x: 40, y: 20 } } });
    const png = await sharp({ create: { width: 320, height: 200, channels: 3, background: { r: 30, g: 120, b: 200 } } }).png().toBuffer();
    await s.attachObservation(0, 'post', png);
    s.recordStep({ step_index: 1, step_id: 'submit-form', status: 'failed', failure_class: 'submit_failed', action: { type: 'CLICK', params: { x: 10, y: 10 } } } as never);
    await s.close('failed');

    await page.goto(`${gw.url}/ui/#/traces`);
    await page.waitForSelector('#trace-email');
    await page.type('#trace-email', READER.email);
    await page.type('#trace-password', READER.password);
    await page.click('form.signin button');
    await page.waitForSelector('table.traces tbody tr a');
    const listed = await page.$$eval('table.traces tbody tr a', (as) => as.map((a) => a.textContent));
    expect(listed).to.include('sdk-run-1');
    expect(listed, "the gateway's own runs are traces too").to.include(ids.ok);

    await page.click('a[href="#/traces/sdk-run-1"]');
    await page.waitForSelector('ol.steps li.step');
    expect(await page.$$eval('ol.steps li.step', (lis) => lis.map((li) => li.classList.contains('failed')))).to.deep.equal([false, true]);
    expect(await text('#step-1 .badge')).to.equal('submit_failed');
    await page.click('#step-0 button.shots');
    await page.waitForSelector('#step-0 .pair img');
    expect(await page.$$eval('#step-0 .pair figcaption', (fs) => fs.map((f) => f.textContent))).to.deep.equal(['Before: none', 'After']);

    // a gateway run read back from the trace service: the same steps as the run view. The moment the
    // hash changes the previous trace's steps leave the screen (they stayed until this one's arrived)
    const onChange = await page.evaluate(`new Promise((resolve) => {
      window.addEventListener('hashchange', () => resolve({ steps: document.querySelectorAll('ol.steps li.step').length, loading: Boolean(document.querySelector('#main .loading')) }), { once: true });
      location.hash = ${JSON.stringify(`#/traces/${ids.ok}`)};
    })`);
    expect(onChange).to.deep.equal({ steps: 0, loading: true });
    await page.waitForFunction("document.querySelector('ol.steps li.step .path')?.textContent === 'steps[0]'", { timeout: 30_000 });
    expect(await page.$$eval('ol.steps li.step .path', (ps) => ps.map((p) => p.textContent))).to.deep.equal(['steps[0]', 'steps[1]', 'steps[2]', 'steps[3]', 'steps[4]']);
    await snapshot(page, 'trace');
  });

  it('shows another tenant none of these runs, and 404 for one of them', async () => {
    await page.click('#signout');
    await signIn(beta);
    await page.waitForSelector('table.runs tbody tr');
    expect(await text('table.runs tbody')).to.include('No runs yet.');
    await page.goto(`${gw.url}/ui/#/runs/${ids.ok}`);
    await page.waitForSelector('p.error');
    expect(await text('p.error')).to.match(/not found|no run/i);
  });

  it('keeps the tokens out of the gateway logs', () => {
    const logs = gw.logs.join('\n');
    expect(logs).to.not.include(alpha);
    expect(logs).to.not.include(beta);
  });

  it('serves its files with a strict content security policy, and GET only', async () => {
    const res = await fetch(`${gw.url}/ui/`);
    expect(res.headers.get('content-security-policy')).to.include("script-src 'self'");
    expect(res.headers.get('x-frame-options')).to.equal('DENY');
    expect((await fetch(`${gw.url}/ui/`, { method: 'POST' })).status).to.equal(405);
    expect((await fetch(`${gw.url}/ui/secrets.json`)).status).to.equal(404);
  });
});
