// Issue 12: anti-bot pages are recognised on both planes (real agents and
// Chromium, local fixture pages per vendor): a challenge that clears is waited
// out and the step goes on, one that never clears halts cf_challenge after
// SERVICE_CF_PREWARM_MAX_SECONDS, a block or rate limit halts page_blocked, and
// the verdict is in the step's data. Issue 40: the same verdicts on a page a click
// or a brain's action reaches, and a popup a click opens is followed.
import { expect } from 'chai';
import { antiBotVerdict } from '../../shared/antibot.ts';
import { newToken, startGateway, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';
import { fakeBrainsDir, startFakeModel, type FakeModel } from '../support/fake-model.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('anti-bot verdicts (pure)', () => {
  it('names vendor and kind from status, headers, title and markers, and stays quiet on ordinary pages', () => {
    expect(antiBotVerdict({ status: 403, headers: { server: 'cloudflare', 'cf-mitigated': 'challenge' }, title: 'Just a moment...' })).to.include({ vendor: 'cloudflare', kind: 'challenge' });
    expect(antiBotVerdict({ status: 403, headers: { 'cf-ray': 'x' }, title: 'Attention Required! | Cloudflare' })).to.include({ vendor: 'cloudflare', kind: 'hard_block' });
    expect(antiBotVerdict({ status: 200, headers: {}, title: 'x', markers: ['cf_turnstile'] })).to.include({ vendor: 'cloudflare', kind: 'captcha' });
    expect(antiBotVerdict({ status: 403, headers: {}, title: 'x', markers: ['px_captcha'] })).to.include({ vendor: 'perimeterx', kind: 'captcha' });
    expect(antiBotVerdict({ status: 403, headers: { 'x-datadome': 'protected' }, title: '' })).to.include({ vendor: 'datadome', kind: 'captcha' });
    expect(antiBotVerdict({ status: 200, headers: {}, title: '', text: 'Request unsuccessful. Incapsula incident ID: 42' })).to.include({ vendor: 'imperva', kind: 'access_denied' });
    expect(antiBotVerdict({ status: 403, headers: { server: 'AkamaiGHost' }, title: 'Access Denied', text: 'Reference #18.abc' })).to.include({ vendor: 'akamai', kind: 'access_denied' });
    expect(antiBotVerdict({ status: 429, headers: {}, title: 'Too Many Requests' })).to.include({ vendor: 'unknown', kind: 'rate_limit' });
    // ordinary pages, including Cloudflare-served ones and plain errors
    expect(antiBotVerdict({ status: 200, headers: { server: 'cloudflare', 'cf-ray': 'x' }, title: 'Shop' })).to.equal(null);
    expect(antiBotVerdict({ status: 404, headers: {}, title: 'Not found' })).to.equal(null);
    expect(antiBotVerdict({ status: 403, headers: {}, title: 'Forbidden' })).to.equal(null);
  });
});

for (const plane of ['dom_plane', 'computer_plane'] as const) {
  describe(`anti-bot pages on ${plane} (real agent and Chromium)`, function () {
    this.timeout(240_000);
    let gw: TestGateway;
    let site: Site;
    let fake: FakeModel;
    const token = newToken();
    const prewarm = process.env.SERVICE_CF_PREWARM_MAX_SECONDS;

    before(async () => {
      process.env.SERVICE_CF_PREWARM_MAX_SECONDS = '6';
      [site, fake] = await Promise.all([startSite(), startFakeModel()]);
      const { dir, brainsPath } = await fakeBrainsDir(fake, 'bots');
      gw = await startGateway({
        dir,
        env: { SERVICE_RUNNER: 'on', SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1', SERVICE_MAX_ACTIVE_RUNS: '2', SERVICE_BRAINS_PATH: brainsPath },
        keys: { [token]: { tenant_id: 'bots', rate_limit_per_minute: 0, max_concurrent_runs: 5 } },
      });
    });
    after(async () => {
      if (prewarm === undefined) delete process.env.SERVICE_CF_PREWARM_MAX_SECONDS;
      else process.env.SERVICE_CF_PREWARM_MAX_SECONDS = prewarm;
      await gw.close();
      await Promise.all([site.close(), fake.close()]);
    });

    async function open(path: string, then: Body[] = []): Promise<{ run: Body; life: Body; step: Body }> {
      const plan = [{ intent: 'open the page', type: 'navigate', url: `${site.url}${path}` }, ...then];
      const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: false, compute_backend: plane } });
      expect(r.status, r.text).to.equal(200);
      const life = (await gw.req('GET', `/v1/runs/${r.body.run_id}`, { token })).body as Body;
      return { run: r.body, life, step: r.body.steps.at(-1) as Body };
    }

    it('waits out a challenge that clears and goes on, with the verdict in the step data', async () => {
      const { run, step } = await open(`/cf/clears?id=${plane}`);
      expect(run.status, JSON.stringify(step).slice(0, 400)).to.equal('succeeded');
      expect(step.page_title).to.equal('Cleared');
      expect(step.data).to.match(/anti-bot challenge by cloudflare cleared after/);
    });

    it('halts cf_challenge when the challenge never clears', async () => {
      const { run, life, step } = await open(`/cf/stuck?id=${plane}`);
      expect(run.status).to.equal('failed');
      expect(step.failure_class).to.equal('cf_challenge');
      expect(step.data).to.match(/"vendor":"cloudflare","kind":"challenge"/);
      expect(life.halt_class).to.equal('cf_challenge');
      expect(run.error).to.equal('page_blocked');
    });

    it('halts page_blocked on a hard block and on a rate limit', async () => {
      for (const [path, kind] of [
        ['/cf/blocked', 'hard_block'],
        ['/ratelimited', 'rate_limit'],
      ]) {
        const { run, life, step } = await open(path!);
        expect(run.status, path).to.equal('failed');
        expect(life.halt_class, path).to.equal('page_blocked');
        expect(run.error, path).to.equal('page_blocked');
        expect(step.data, path).to.include(`"kind":"${kind}"`);
      }
    });

    it('recognises PerimeterX and DataDome captchas (halt cf_challenge, vendor named)', async () => {
      for (const [path, vendor] of [
        ['/px', 'perimeterx'],
        ['/datadome', 'datadome'],
      ]) {
        const { life, step } = await open(path!);
        expect(life.halt_class, path).to.equal('cf_challenge');
        expect(step.data, path).to.include(`"vendor":"${vendor}","kind":"captcha"`);
      }
    });

    it('recognises an Imperva denial from its words (halt page_blocked, vendor named)', async () => {
      const { run, life, step } = await open('/imperva');
      expect(run.status).to.equal('failed');
      expect(life.halt_class).to.equal('page_blocked');
      expect(step.data).to.include('"vendor":"imperva","kind":"access_denied"');
    });

    // the big link of /go is at the top left: coordinates reach it on both planes, as the fake brain's "hit" click does
    const click = { intent: 'press the big link', type: 'click', params: { x: 300, y: 200 } };

    it('judges the page a click reaches: a block halts page_blocked, a challenge is waited out, a plain page is the page', async () => {
      const blocked = await open('/go?to=/cf/blocked', [click]);
      expect(blocked.run.status).to.equal('failed');
      expect(blocked.life.halt_class).to.equal('page_blocked');
      expect(blocked.step).to.include({ type: 'click', failure_class: 'http_4xx' });
      expect(blocked.step.data).to.include('"kind":"hard_block"');
      // the two that go on share a run (a session costs a browser, a display and a recording on computer_plane):
      // a challenge a click reaches is waited out, then a plain page a click reaches is only the page
      const passed = await open(`/go?to=/cf/clears%3Fid%3Dclick-${plane}`, [click, { intent: 'open the plain link', type: 'navigate', url: `${site.url}/go?to=/static` }, click]);
      expect(passed.run.status, JSON.stringify(passed.run.steps).slice(0, 600)).to.equal('succeeded');
      const [, cleared, , plain] = passed.run.steps as Body[];
      expect(cleared).to.include({ type: 'click', success: true, page_title: 'Cleared' });
      expect(cleared!.data).to.match(/anti-bot challenge by cloudflare cleared after/);
      expect(plain).to.include({ type: 'click', success: true, page_title: 'Static' });
      expect(String(plain!.data ?? '')).not.to.include('anti-bot');
    });

    it("judges the page a brain's action reaches: a captcha halts cf_challenge, a block page_blocked", async () => {
      const brain = { intent: 'hit the big link', type: 'default-cua', max_steps: 3 };
      for (const [path, halt, kind] of [
        ['/go?to=/px', 'cf_challenge', 'captcha'],
        ['/go?to=/cf/blocked', 'page_blocked', 'hard_block'],
      ]) {
        const { run, life, step } = await open(path!, [brain]);
        expect(run.status, path).to.equal('failed');
        expect(life.halt_class, path).to.equal(halt);
        expect(step.type, path).to.equal('default-cua');
        expect(step.data, path).to.include(`"kind":"${kind}"`);
        expect(step.last_action?.type, path).to.equal('CLICK');
      }
    });

    it('follows a popup a click opens: the step ends on the popup, the run goes on', async () => {
      const clicks: Body[] = [{ ...click, intent: 'open the popup' }, ...(plane === 'dom_plane' ? [{ intent: 'open the popup', type: 'click', params: { selector: '#pop' } }] : [])];
      for (const c of clicks) {
        const { run, step } = await open('/popup', [c, { intent: 'finish', type: 'done' }]);
        expect(run.status, JSON.stringify(run.steps).slice(0, 600)).to.equal('succeeded');
        const clicked = run.steps[1] as Body;
        expect(clicked, JSON.stringify(c)).to.include({ type: 'click', success: true, page_title: 'Item popped' });
        expect(clicked.final_url).to.match(/\/item\/popped$/);
        expect(step.type).to.equal('done');
      }
    });
  });
}
