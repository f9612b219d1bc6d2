// Event streams from a browser: an EventSource cannot send X-Service-Token, so
// GET /v1/runs/{id}/events?sse=true takes a single-use ticket of
// POST /v1/ws-tickets as ?ticket=. Tested with the `eventsource` package (the
// WHATWG EventSource for Node) and with a real browser page; a used, forged or
// another tenant's ticket is refused, a ticket opens SSE only, and it never
// reaches a log. Real gateway, agent and Chromium on dom_plane.
import { expect } from 'chai';
import { EventSource } from 'eventsource';
import type { Browser } from 'puppeteer-core';
import { RUNNER_ENV, newToken, startGateway, until, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';
import { launchTestBrowser } from '../support/browser.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const TYPES = ['run.queued', 'run.status', 'step.started', 'step.finished', 'run.ended'];

describe('SSE with single-use tickets (eventsource package and a real browser)', function () {
  this.timeout(180_000);
  let gw: TestGateway;
  let site: Site;
  let browser: Browser | undefined;
  const alpha = newToken();
  const beta = newToken();
  const issued: string[] = [];

  before(async () => {
    site = await startSite();
    gw = await startGateway({
      env: { ...RUNNER_ENV },
      keys: {
        [alpha]: { tenant_id: 'alpha', rate_limit_per_minute: 0, max_concurrent_runs: 3, default_compute_backend: 'dom_plane' },
        [beta]: { tenant_id: 'beta', rate_limit_per_minute: 0, max_concurrent_runs: 3, default_compute_backend: 'dom_plane' },
      },
    });
  });
  after(async () => {
    await browser?.close();
    await gw.close();
    await site.close();
  });

  const ticket = async (token: string): Promise<string> => {
    const r = await gw.req('POST', '/v1/ws-tickets', { token });
    expect(r.status).to.equal(200);
    issued.push(r.body.ticket);
    return r.body.ticket as string;
  };
  const start = async (seconds: number): Promise<string> => {
    const plan = [{ intent: 'open', type: 'navigate', url: `${site.url}/static` }, { intent: 'wait', type: 'wait', seconds }];
    const r = await gw.req('POST', '/v1/predict', { token: alpha, body: { plan, detached: true } });
    expect(r.status, r.text).to.equal(200);
    return r.body.run_id as string;
  };
  const sse = (id: string, t: string) => `${gw.url}/v1/runs/${id}/events?sse=true&ticket=${encodeURIComponent(t)}`;

  it('follows a running run with an EventSource opened by a ticket, to its end', async () => {
    const id = await start(2);
    const seen: Body[] = [];
    const es = new EventSource(sse(id, await ticket(alpha)));
    // events are named by their type (`event: step.finished`)
    const ended = new Promise<void>((resolve, reject) => {
      for (const type of TYPES) {
        es.addEventListener(type, (m) => {
          const e = JSON.parse(m.data) as Body;
          seen.push(e);
          if (e.type === 'run.ended') resolve();
        });
      }
      es.onerror = () => {
        if (!seen.some((e) => e.type === 'run.ended')) reject(new Error('the stream failed before the end'));
      };
    });
    await ended;
    es.close();
    const all = (await gw.req('GET', `/v1/runs/${id}/events`, { token: alpha })).body.events as Body[];
    expect(seen.map((e) => e.seq), 'every event of these types, in order').to.deep.equal(all.filter((e) => TYPES.includes(e.type)).map((e) => e.seq));
    expect(seen.map((e) => e.type)).to.include.members(['step.started', 'step.finished', 'run.ended']);
  });

  it('refuses a used ticket, a forged one, a ticket for another tenant\'s run, and a ticket off SSE', async () => {
    const id = await start(0);
    const t = await ticket(alpha);
    const first = await fetch(sse(id, t), { headers: { accept: 'text/event-stream' } });
    expect(first.status).to.equal(200);
    await first.body?.cancel();
    const again = await fetch(sse(id, t));
    expect(again.status, 'single use').to.equal(401);
    expect(((await again.json()) as Body).detail).to.equal('ticket unknown, used or expired');
    expect((await fetch(sse(id, 'A'.repeat(32)))).status, 'forged').to.equal(401);
    expect((await fetch(sse(id, '../../etc'))).status, 'not a ticket').to.equal(401);
    expect((await fetch(sse(id, await ticket(beta)))).status, "another tenant's run").to.equal(404);
    const plain = await fetch(`${gw.url}/v1/runs/${id}/events?ticket=${await ticket(alpha)}`);
    expect(plain.status, 'tickets open event streams only').to.equal(401);
    expect((await fetch(`${gw.url}/v1/runs/${id}?ticket=${await ticket(alpha)}`)).status).to.equal(401);
  });

  it('lets a page in a real browser follow a run with EventSource and a ticket', async () => {
    const id = await start(2);
    const t = await ticket(alpha);
    browser = await launchTestBrowser();
    const page = await browser.newPage();
    await page.goto(`${gw.url}/ui/`);
    await page.evaluate(`(() => {
      window.seen = [];
      const es = new EventSource(${JSON.stringify(`/v1/runs/${id}/events?sse=true&ticket=${t}`)});
      for (const type of ${JSON.stringify(TYPES)}) es.addEventListener(type, (m) => { const e = JSON.parse(m.data); window.seen.push(e.type); if (e.type === 'run.ended') { es.close(); window.done = true; } });
    })()`);
    await page.waitForFunction('window.done === true', { timeout: 60_000 });
    const types = (await page.evaluate('window.seen')) as string[];
    expect(types.at(-1)).to.equal('run.ended');
    expect(types).to.include('step.finished');
  });

  it('keeps tickets out of the logs', async () => {
    await until(async () => issued.length > 0, 1000);
    const logs = gw.logs.join('\n');
    for (const t of issued) expect(logs).to.not.include(t);
  });
});
