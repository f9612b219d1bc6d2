// Issue 42, any live run: a status token watches a running run's screen (read-only:
// inputs refused), an operator opens the same screen in the viewer and presses Take over;
// the one-time link opens the same takeover page a run's own request opens; the run waits
// before its next step (awaiting_human); the operator types the second factor on the live
// screen and presses Done; the run signs in and finishes. Its events say which key took
// over and when (the key's id, never the token). Real gateway, dom_plane agent, Chromium.
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import type { Browser } from 'puppeteer-core';
import { RUNNER_ENV, newToken, startGateway, until, type TestGateway } from '../support/gateway.ts';
import { startTakeoverSite, type TakeoverSite } from '../support/takeover-site.ts';
import { launchTestBrowser } from '../support/browser.ts';
import { screenPointer, signInPlan } from '../support/live-screen.ts';
import { message, upgrade } from '../support/ws-client.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('an operator watches and takes over a running run (not a session) with the takeover page (real Chromium both sides)', function () {
  this.timeout(240_000);
  let gw: TestGateway;
  let site: TakeoverSite;
  let browser: Browser;
  const operator = newToken();
  const watcher = newToken();
  const other = newToken();
  const login = { username: 'carol@example.com', password: `pw-${randomBytes(9).toString('base64url')}` };

  before(async () => {
    site = await startTakeoverSite(login);
    gw = await startGateway({
      env: { ...RUNNER_ENV, SERVICE_TAKEOVER_SECONDS: '120' },
      keys: {
        [operator]: { tenant_id: 'acme', scopes: ['run', 'status', 'result', 'logs', 'operator'], rate_limit_per_minute: 0, default_compute_backend: 'dom_plane' },
        [watcher]: { tenant_id: 'acme', scopes: ['status', 'result', 'logs'], rate_limit_per_minute: 0 },
        [other]: { tenant_id: 'beta', scopes: ['run', 'status', 'result', 'logs', 'operator'], rate_limit_per_minute: 0 },
      },
    });
    browser = await launchTestBrowser();
  });
  after(async () => {
    await browser?.close();
    await gw?.close();
    await site?.close();
  });

  it('a status token watches read-only; the operator presses Take over, types the code on the same takeover page, Done; the run waited, finished, and names the key', async () => {
    // no person is asked for in the plan: without the operator the run cannot get past the second factor
    const plan = signInPlan(site.url, login, { intent: 'give an operator time to step in', type: 'wait', seconds: 12 });
    const r = await gw.req('POST', '/v1/predict', { token: operator, body: { plan, detached: true } });
    expect(r.status, r.text).to.equal(200);
    const id = r.body.run_id as string;
    const events = async (): Promise<Body[]> => (await gw.req('GET', `/v1/runs/${id}/events`, { token: operator })).body.events as Body[];
    expect(await until(async () => site.received.some((x) => x.path === '/login'), 90_000), 'the run signed in').to.equal(true);
    const ws = `${gw.url.replace('http', 'ws')}/v1/runs/${id}/live`;

    // a status token watches: a ticket for a browser, or its header for a server; inputs are refused
    const ticket = await gw.req('POST', `/v1/runs/${id}/live-ticket`, { token: watcher, body: {} });
    expect(ticket.status, ticket.text).to.equal(200);
    expect(ticket.body.control).to.equal(false);
    expect((await gw.req('POST', `/v1/runs/${id}/live-ticket`, { token: watcher, body: { control: true } })).status).to.equal(400);
    const watch = await upgrade(ws, {}, ticket.body.protocol as string[]);
    expect(watch.status, watch.body).to.equal(101);
    expect((await message(watch.ws!, (m) => m.type === 'hello')).control).to.equal(false);
    await message(watch.ws!, (m) => m.type === 'frame', 60_000);
    const refused = message(watch.ws!, (m) => m.type === 'error');
    watch.ws!.send(JSON.stringify({ type: 'mouse', action: 'down', x: 190, y: 140, seq: 3 }));
    expect(await refused).to.deep.equal({ type: 'error', detail: 'this screen is read-only: inputs are not relayed', seq: 3 });
    watch.ws!.close();
    // the ticket was used; another tenant's run is not there; a watcher cannot take over
    expect((await upgrade(ws, {}, ticket.body.protocol as string[])).status).to.equal(401);
    expect((await upgrade(ws, { 'X-Service-Token': other })).status).to.equal(404);
    expect((await gw.req('POST', `/v1/runs/${id}/live-ticket`, { token: other, body: {} })).status).to.equal(404);
    expect((await gw.req('POST', `/v1/runs/${id}/takeover`, { token: other, body: {} })).status).to.equal(404);
    expect((await gw.req('POST', `/v1/runs/${id}/takeover`, { token: watcher, body: {} })).status).to.equal(403);
    expect((await gw.req('POST', `/v1/runs/${id}/takeover`, { token: operator, body: { timeout_seconds: 'soon' } })).status).to.equal(400);

    // the operator watches in the viewer, then takes over: the link opens the takeover page
    const tab = await browser.newPage();
    await tab.setViewport({ width: 1400, height: 1000 });
    await tab.goto(`${gw.url}/ui/`);
    await tab.waitForSelector('#token');
    await tab.type('#token', operator);
    await tab.click('form.signin button');
    await tab.waitForSelector('table.runs');
    await tab.goto(`${gw.url}/ui/#/runs/${id}/live`);
    await tab.waitForFunction("Number(document.querySelector('#live-screen')?.dataset.frames ?? 0) > 0", { timeout: 60_000 });
    expect(await tab.$eval('#live-mode', (e) => e.textContent)).to.match(/^Watch only/);
    await Promise.all([tab.waitForNavigation(), tab.click('#take-over')]);
    expect(new URL(tab.url()).pathname).to.equal('/ui/takeover');
    await tab.waitForFunction("Number(document.querySelector('#live-screen')?.dataset.frames ?? 0) > 0", { timeout: 60_000 });
    expect(await tab.$eval('#takeover-message', (e) => e.textContent)).to.include('An operator takes this run over');
    // one takeover at a time
    expect((await gw.req('POST', `/v1/runs/${id}/takeover`, { token: operator, body: {} })).status).to.equal(409);

    // the run waits for the operator before its next step
    expect(await until(async () => (await gw.req('GET', `/v1/runs/${id}`, { token: watcher })).body.phase === 'awaiting_human', 60_000), 'awaiting_human').to.equal(true);
    const at = await screenPointer(tab);
    await tab.mouse.click(...at(190, 140));
    await tab.keyboard.type(site.code);
    await tab.keyboard.press('Enter');
    expect(await until(async () => site.received.some((x) => x.path === '/code' && x.body.code === site.code), 30_000), "the run's page got the code from the operator").to.equal(true);
    await tab.click('#takeover-done');
    await tab.waitForSelector('#takeover-title');
    await tab.close();

    let run: Body = {};
    expect(await until(async () => ['succeeded', 'failed', 'cancelled'].includes((run = (await gw.req('GET', `/v1/runs/${id}`, { token: operator })).body).status), 90_000), 'run ended').to.equal(true);
    expect(run.status, JSON.stringify(run.failure_help)).to.equal('succeeded');
    expect(JSON.stringify((await gw.req('GET', `/v1/runs/${id}/artifacts/extracted_rows.json`, { token: operator })).body)).to.include('Welcome, signed in');

    // who and when: the key's id (a digest's prefix) and tenant, never the token; the code nowhere
    const key = { key_id: `key_${createHash('sha256').update(operator).digest('hex').slice(0, 16)}`, tenant_id: 'acme' };
    const all = await events();
    const asked = all.find((e) => e.type === 'takeover_requested')!;
    expect(asked.data).to.deep.include({ reason: 'operator', requested_by: key });
    expect(Number.isNaN(Date.parse(asked.data.at as string))).to.equal(false);
    expect(asked.data).to.not.have.property('link');
    expect(all.some((e) => e.type === 'run.status' && e.data.phase === 'awaiting_human')).to.equal(true);
    const end = all.find((e) => e.type === 'takeover_ended')!;
    expect(end.data).to.deep.include({ outcome: 'done', by: 'link', requested_by: key });
    expect(Date.parse(end.data.ended_at as string)).to.be.at.least(Date.parse(end.data.opened_at as string));
    expect(end.data.inputs.total).to.be.greaterThan(site.code.length);
    const takeover = (await gw.req('GET', `/v1/runs/${id}/takeover`, { token: watcher })).body as Body;
    expect(takeover).to.deep.include({ reason: 'operator', status: 'done', requested_by: key });
    const everything = JSON.stringify([run, all, takeover]) + gw.logs.join('\n');
    expect(everything).to.not.include(site.code);
    expect(everything).to.not.include(operator);

    // the trace has the intervention: when, how long, the inputs as counts, the page before and after; never the code
    const trace = await gw.req('GET', `/v1/runs/${id}/trace`, { token: operator });
    expect(trace.status, trace.text).to.equal(200);
    const files = trace.body.files as Array<{ path: string; url: string }>;
    const fetchFile = async (f: { url: string }): Promise<Buffer> => {
      const res = await fetch(new URL(f.url, gw.url), { headers: { 'X-Service-Token': operator } });
      expect(res.status).to.equal(200);
      return Buffer.from(await res.arrayBuffer());
    };
    const decisions = (await Promise.all(files.filter((f) => f.path.startsWith('events/')).map(fetchFile))).flatMap((b) => b.toString().trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as Body));
    const iv = decisions.find((d) => d.layer === 'intervention' && d.payload?.takeover_id === asked.data.takeover_id)!;
    expect(iv, 'the intervention decision').to.not.equal(undefined);
    expect(iv.payload).to.deep.include({ outcome: 'done', by: 'link', requested_by: key, screenshots: { before: true, after: true } });
    expect(iv.payload.duration_ms).to.equal(end.data.duration_ms);
    expect(iv.payload.inputs.total).to.equal(end.data.inputs.total);
    expect(iv.payload.inputs.typed_characters).to.equal(site.code.length);
    const at4 = String(iv.step_index).padStart(4, '0');
    for (const kind of ['intervention_before', 'intervention_after']) {
      const f = files.find((x) => x.path === `screenshots/${at4}_${kind}.png`);
      expect(f, kind).to.not.equal(undefined);
      expect((await fetchFile(f!)).subarray(1, 4).toString()).to.equal('PNG');
    }
    const stepFile = files.find((x) => x.path === `steps/${at4}.json`);
    expect(stepFile, 'the step record').to.not.equal(undefined);
    expect(JSON.parse((await fetchFile(stepFile!)).toString()).observation).to.include({ intervention_before: `screenshots/${at4}_intervention_before.png` });
    const texts = await Promise.all(files.filter((f) => !f.path.endsWith('.png')).map(fetchFile));
    expect(texts.map((b) => b.toString()).join('\n')).to.not.include(site.code);

    // an ended run's screen is gone
    expect((await gw.req('POST', `/v1/runs/${id}/live-ticket`, { token: watcher, body: {} })).status).to.equal(409);
    expect((await upgrade(ws, { 'X-Service-Token': watcher })).status).to.equal(409);
    expect((await gw.req('POST', `/v1/runs/${id}/takeover`, { token: operator, body: {} })).status).to.equal(409);
  });
});
