// Issue 42 end to end: a run fills a login, reaches a second factor only the person
// knows and asks for help; the person (real Chromium on the viewer's takeover page)
// opens the one-time link, clicks the code field on the live screen, types the code
// and Enter through the relay, presses Done, and the run finishes its plan. Real
// gateway, dom_plane agent, Chromium; nothing the person typed is in the record.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import type { Browser } from 'puppeteer-core';
import { RUNNER_ENV, newToken, startGateway, until, type TestGateway } from '../support/gateway.ts';
import { startTakeoverSite, type TakeoverSite } from '../support/takeover-site.ts';
import { launchTestBrowser } from '../support/browser.ts';
import { liveScreen, signInPlan } from '../support/live-screen.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('a person takes over a waiting run through the link and its live screen (real Chromium both sides)', function () {
  this.timeout(240_000);
  let gw: TestGateway;
  let site: TakeoverSite;
  let browser: Browser;
  const token = newToken();
  const login = { username: 'bob@example.com', password: `pw-${randomBytes(9).toString('base64url')}` };

  before(async () => {
    site = await startTakeoverSite(login);
    gw = await startGateway({ env: { ...RUNNER_ENV, SERVICE_TAKEOVER_SECONDS: '120' }, keys: { [token]: { tenant_id: 'acme', rate_limit_per_minute: 0, default_compute_backend: 'dom_plane' } } });
    browser = await launchTestBrowser();
  });
  after(async () => {
    await browser?.close();
    await gw?.close();
    await site?.close();
  });

  it('the person clicks the field on the live screen, types the code and Enter, presses Done; the run signs in and finishes', async () => {
    const plan = signInPlan(site.url, login, { intent: 'type the code from your phone', type: 'request_human', params: { message: 'Type the code from your phone and press Enter, then Done' } });
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: true } });
    expect(r.status, r.text).to.equal(200);
    const id = r.body.run_id as string;
    const events = async (): Promise<Body[]> => (await gw.req('GET', `/v1/runs/${id}/events`, { token })).body.events as Body[];
    let ask: Body | undefined;
    expect(await until(async () => !!(ask = (await events()).find((e) => e.type === 'takeover_requested')?.data as Body | undefined), 90_000), 'takeover_requested').to.equal(true);

    // the person opens the link: the page claims it and shows the run's screen
    const tab = await browser.newPage();
    await tab.setViewport({ width: 1400, height: 1000 });
    await tab.goto(ask!.link as string);
    const at = await liveScreen(tab);
    expect(await tab.$eval('#takeover-message', (e) => e.textContent)).to.include('Type the code from your phone');
    expect((await gw.req('GET', `/v1/runs/${id}/takeover`, { token })).body.status).to.equal('opened');
    // the code field is at (40, 120)-(340, 160) of the run's page
    await tab.mouse.click(...at(190, 140));
    await tab.keyboard.type(site.code);
    await tab.keyboard.press('Enter');
    expect(await until(async () => site.received.some((x) => x.path === '/code' && x.body.code === site.code), 30_000), 'the run\'s page got the code from the person').to.equal(true);
    await tab.click('#takeover-done');
    await tab.waitForSelector('#takeover-title');
    expect(await tab.$eval('#takeover-title', (e) => e.textContent)).to.equal('Thank you: the run goes on');
    await tab.close();

    let run: Body = {};
    expect(await until(async () => ['succeeded', 'failed', 'cancelled'].includes((run = (await gw.req('GET', `/v1/runs/${id}`, { token })).body).status), 90_000), 'run ended').to.equal(true);
    expect(run.status, JSON.stringify(run.failure_help)).to.equal('succeeded');
    const rows = await gw.req('GET', `/v1/runs/${id}/artifacts/extracted_rows.json`, { token });
    expect(JSON.stringify(rows.body)).to.include('Welcome, signed in');
    // the record has the person's inputs as counts, places and lengths: never the code
    const end = (await events()).find((e) => e.type === 'takeover_ended')!;
    expect(end.data).to.include({ outcome: 'done', by: 'link' });
    expect(end.data.inputs.total).to.be.greaterThan(site.code.length);
    const takeover = (await gw.req('GET', `/v1/runs/${id}/takeover`, { token })).body as Body;
    expect(takeover.status).to.equal('done');
    const everything = JSON.stringify([run, await events(), takeover, (await gw.req('GET', `/v1/runs/${id}/result`, { token })).body]) + gw.logs.join('\n');
    expect(everything).to.not.include(site.code);
  });
});
