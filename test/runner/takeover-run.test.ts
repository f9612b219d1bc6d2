// A run asks for a person (issue 42), on a real gateway, dom_plane agent and
// Chromium: a login form with a second factor only the person knows; the plan
// fills the login, then request_human; the test claims the link over HTTP, plays
// the person (the fixture's page types the code the person gives it: the live
// screen and its input relay are another slice's), presses Done, and the run
// finishes its plan. Also: Fail, expiry, cancel while waiting, the time cap paused,
// a second claim, another tenant; on_challenge ask_human; the brain's ASK_HUMAN.
import { expect } from 'chai';
import { createHmac, randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { RUNNER_ENV, newToken, sleep, startGateway, until, type TestGateway } from '../support/gateway.ts';
import { startTakeoverSite, type TakeoverSite } from '../support/takeover-site.ts';
import { fakeBrainsDir, startFakeModel, type FakeModel } from '../support/fake-model.ts';
import { validator } from '../../schemas/index.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('a run asks for a person (real gateway, dom_plane agent and Chromium)', function () {
  this.timeout(180_000);
  let gw: TestGateway;
  let site: TakeoverSite;
  let fake: FakeModel;
  const token = newToken();
  const other = newToken();
  const login = { username: 'alice@example.com', password: `pw-${randomBytes(9).toString('base64url')}` };
  const hookSecret = randomBytes(24).toString('base64');

  before(async () => {
    [site, fake] = await Promise.all([startTakeoverSite(login), startFakeModel()]);
    const { dir, brainsPath } = await fakeBrainsDir(fake, 'takeover');
    await writeFile(path.join(dir, 'secrets', 'hook-secret'), hookSecret);
    gw = await startGateway({
      dir,
      env: { ...RUNNER_ENV, SERVICE_BRAINS_PATH: brainsPath, SERVICE_TAKEOVER_SECONDS: '60', SERVICE_MAX_ACTIVE_RUNS: '2' },
      keys: {
        [token]: { tenant_id: 'acme', rate_limit_per_minute: 0, default_compute_backend: 'dom_plane', webhook_url: `${site.url}/hook`, webhook_secret_name: 'hook-secret' },
        [other]: { tenant_id: 'other', rate_limit_per_minute: 0 },
      },
    });
  });
  after(async () => {
    await gw?.close();
    await site?.close();
    await fake?.close();
  });

  const loginSteps = () => [
    { intent: 'open the sign-in page', type: 'navigate', url: `${site.url}/login`, required: true },
    { intent: 'type the username', type: 'type_text', params: { selector: '#username', text: login.username }, required: true },
    { intent: 'type the password', type: 'fill_field', params: { selector: '#password', value: login.password }, required: true },
    { intent: 'sign in', type: 'click', params: { selector: '#go' }, hints: { expect_url_contains: '/code' }, required: true },
  ];
  const welcome = { intent: 'read the greeting', type: 'extract_data', extract: { schema_name: 'welcome', item_selector: 'body', fields: [{ name: 'hello', type: 'str', selector: '#hello', required: true }] }, required: true };

  async function start(plan: unknown, extra: Record<string, unknown> = {}): Promise<string> {
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: true, compute_backend: 'dom_plane', ...extra } });
    expect(r.status, r.text).to.equal(200);
    return r.body.run_id as string;
  }
  const events = async (id: string): Promise<Body[]> => (await gw.req('GET', `/v1/runs/${id}/events`, { token })).body.events as Body[];
  async function requested(id: string): Promise<Body> {
    let found: Body | undefined;
    expect(await until(async () => !!(found = (await events(id)).find((e) => e.type === 'takeover_requested')), 90_000), 'takeover_requested').to.equal(true);
    return found!.data as Body;
  }
  async function ended(id: string): Promise<Body> {
    let run: Body = {};
    expect(await until(async () => ['succeeded', 'failed', 'cancelled'].includes((run = (await gw.req('GET', `/v1/runs/${id}`, { token })).body).status), 90_000), 'run ended').to.equal(true);
    return run;
  }
  async function claim(link: string): Promise<Body> {
    const r = await gw.req('POST', '/v1/takeover/claim', { body: { token: link.slice(link.indexOf('#') + 1) } });
    expect(r.status, r.text).to.equal(200);
    return r.body as Body;
  }
  const answer = (c: Body, what: 'done' | 'fail', note?: string) => gw.req('POST', `/v1/takeover/${c.takeover_id}/${what}`, { headers: { 'x-takeover-claim': c.claim }, body: note ? { note } : {} });

  it('waits in awaiting_human with its time cap paused; the person types the code and presses Done; the run finishes its plan', async () => {
    const t0 = Date.now();
    // a 12 s cap, and the person comes after 14 s: the cap stops while the run waits
    const id = await start({ steps: [...loginSteps(), { intent: 'type the code from your phone', type: 'request_human', params: { message: 'Type the code from your phone, then press Done' } }, welcome] }, { max_time_minutes: 0.2 });
    const ask = await requested(id);
    expect(ask).to.include({ message: 'Type the code from your phone, then press Done', reason: 'step', path: 'steps[4]' });
    expect(ask.link).to.match(/\/ui\/takeover#[A-Za-z0-9_-]{43}$/);
    expect(Date.parse(ask.expires_at) - Date.now()).to.be.within(40_000, 60_000);
    const life = (await gw.req('GET', `/v1/runs/${id}`, { token })).body as Body;
    expect(life).to.include({ status: 'running', phase: 'awaiting_human' });
    // the signed webhook carries the link
    let hook: TakeoverSite['received'][number] | undefined;
    expect(await until(async () => !!(hook = site.received.find((r) => r.path === '/hook' && r.body.type === 'run.takeover_requested')), 20_000), 'takeover webhook').to.equal(true);
    expect((hook!.body as unknown as Body).data).to.include({ run_id: id, takeover_id: ask.takeover_id, link: ask.link });
    const h = hook!.headers;
    const signed = createHmac('sha256', Buffer.from(hookSecret, 'base64')).update(`${String(h['webhook-id'])}.${String(h['webhook-timestamp'])}.${hook!.raw}`).digest('base64');
    expect(h['webhook-signature']).to.equal(`v1,${signed}`);
    const c = await claim(ask.link);
    expect(c).to.include({ run_id: id, takeover_id: ask.takeover_id, backend: 'dom_plane' });
    expect(c.viewport.width).to.be.greaterThan(0);
    // the live screen's relay reaches the run's own plane session through target()
    const target = await gw.gateway.services.takeover.target(c.takeover_id, c.claim);
    expect(target?.backend).to.equal('dom_plane');
    expect(target?.endpoint.url).to.match(/^https?:\/\/|^[a-z]+:/);
    expect(target?.endpoint.token).to.be.a('string').and.not.equal('');
    // this replica holds the run: its lease's agent secret comes along for a relay here, and is never stored
    expect(target?.endpoint.secret).to.be.a('string').and.not.equal('');
    const row = await gw.gateway.services.state.store<Record<string, unknown>>('takeovers').get(`acme/${c.takeover_id}`);
    expect(JSON.stringify(row)).to.include(target!.endpoint.token).and.not.include(target!.endpoint.secret!);
    expect(await gw.gateway.services.takeover.target(c.takeover_id, ask.link.split('#')[1]!)).to.equal(null);
    // a second browser opening the link is refused; another tenant cannot see the takeover
    expect((await gw.req('POST', '/v1/takeover/claim', { body: { token: ask.link.split('#')[1] } })).status).to.equal(409);
    expect((await gw.req('GET', `/v1/runs/${id}/takeover`, { token: other })).status).to.equal(404);
    const mine = await gw.req('GET', `/v1/runs/${id}/takeover`, { token });
    expect(mine.status).to.equal(200);
    expect(mine.body).to.include({ takeover_id: ask.takeover_id, status: 'opened', reason: 'step', step_path: 'steps[4]' });
    await sleep(Math.max(0, 14_000 - (Date.now() - t0)));
    site.personTypes(site.code);
    expect(await until(async () => site.received.some((r) => r.path === '/code' && r.body.code === site.code), 20_000), 'the page got the code').to.equal(true);
    const done = await answer(c, 'done', 'signed in with my phone');
    expect(done.status, done.text).to.equal(200);
    const run = await ended(id);
    expect(run.status, JSON.stringify(run.failure_help)).to.equal('succeeded');
    const result = (await gw.req('GET', `/v1/runs/${id}/result`, { token })).body as Body;
    expect(result.steps.map((s: Body) => s.success)).to.deep.equal([true, true, true, true, true, true]);
    expect(result.steps[4].data).to.match(/pressed Done/);
    const rows = await gw.req('GET', `/v1/runs/${id}/artifacts/extracted_rows.json`, { token });
    expect(JSON.stringify(rows.body)).to.include('Welcome, signed in');
    const evs = await events(id);
    const end = evs.find((e) => e.type === 'takeover_ended')!;
    expect(end.data).to.include({ takeover_id: ask.takeover_id, outcome: 'done', by: 'link' });
    expect(end.data.inputs).to.deep.include({ total: 0 });
    expect(evs.filter((e) => e.type === 'run.status').map((e) => e.data.phase)).to.include.members(['awaiting_human', 'running']);
    const after = await gw.req('GET', `/v1/runs/${id}/takeover`, { token });
    expect(after.body).to.include({ status: 'done', by: 'link', note: 'signed in with my phone' });
    expect(validator('responses.schema.json#/$defs/RunTakeover')(after.body), 'the documented body').to.equal(true);
    // the trace holds the intervention on the asking step
    const trace = (await gw.req('GET', `/v1/runs/${id}/trace`, { token })).body as Body;
    let texts = '';
    for (const f of trace.files as Array<{ url: string }>) if (/\.(json|jsonl)$/.test(f.url)) texts += await (await fetch(gw.url + f.url, { headers: { 'X-Service-Token': token } })).text();
    expect(texts).to.include('"intervention"').and.include(ask.takeover_id);
    // what the person typed is nowhere in what the run recorded
    const all = JSON.stringify([evs, result, after.body, (await gw.req('GET', `/v1/runs/${id}`, { token })).body]) + gw.logs.join('') + texts;
    expect(all).not.to.include(site.code);
  });

  it('on computer_plane too: the run waits, target() names its plane session, Done lets it finish', async () => {
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan: { steps: [{ intent: 'open the sign-in page', type: 'navigate', url: `${site.url}/login` }, { intent: 'look at the page', type: 'request_human' }, { intent: 'wait a moment', type: 'wait', seconds: 0.2 }] }, detached: true, compute_backend: 'computer_plane' } });
    expect(r.status, r.text).to.equal(200);
    const id = r.body.run_id as string;
    const c = await claim((await requested(id)).link);
    expect(c.backend).to.equal('computer_plane');
    const target = await gw.gateway.services.takeover.target(c.takeover_id, c.claim);
    expect(target?.backend).to.equal('computer_plane');
    expect(target?.viewport).to.deep.equal(c.viewport);
    expect(target?.endpoint.token).to.be.a('string').and.not.equal('');
    expect((await answer(c, 'done')).status).to.equal(200);
    expect((await ended(id)).status).to.equal('succeeded');
  });

  it('Fail halts the run human_failed, with the note in its failure_help', async () => {
    const id = await start({ steps: [...loginSteps(), { intent: 'type the code from your phone', type: 'request_human' }, welcome] });
    const c = await claim((await requested(id)).link);
    expect((await answer(c, 'fail', 'I do not have the phone')).status).to.equal(200);
    const run = await ended(id);
    expect(run).to.include({ status: 'failed', halt_class: 'human_failed' });
    expect(run.failure_help.likely_causes[0]).to.include('I do not have the phone');
    expect((await events(id)).find((e) => e.type === 'takeover_ended')!.data).to.include({ outcome: 'failed', by: 'link' });
  });

  it('nobody comes: the run halts human_timeout when the link expires, and failure_help says so', async () => {
    const id = await start({ steps: [{ intent: 'open the sign-in page', type: 'navigate', url: `${site.url}/login` }, { intent: 'wait for a person', type: 'request_human', params: { timeout_seconds: 2 } }, welcome] });
    const ask = await requested(id);
    const run = await ended(id);
    expect(run).to.include({ status: 'failed', halt_class: 'human_timeout' });
    expect(run.failure_help.likely_causes[0]).to.match(/nobody took over in time/);
    expect((await gw.req('GET', `/v1/runs/${id}/result`, { token })).body.error).to.equal('timeout');
    expect((await gw.req('POST', '/v1/takeover/claim', { body: { token: ask.link.split('#')[1] } })).status).to.equal(410);
    expect((await gw.req('GET', `/v1/runs/${id}/takeover`, { token })).body).to.include({ status: 'expired', by: 'timeout' });
  });

  it('cancel works while waiting: the run ends cancelled, the takeover cancelled, the link gone', async () => {
    const id = await start({ steps: [{ intent: 'open the sign-in page', type: 'navigate', url: `${site.url}/login` }, { intent: 'wait for a person', type: 'request_human' }, welcome] });
    const ask = await requested(id);
    const c = await claim(ask.link);
    const r = await gw.req('POST', `/v1/runs/${id}/cancel`, { token });
    expect(r.status, r.text).to.equal(200);
    const run = await ended(id);
    expect(run).to.include({ status: 'cancelled', halt_class: 'cancelled' });
    expect((await gw.req('GET', `/v1/runs/${id}/takeover`, { token })).body).to.include({ status: 'cancelled', by: 'run' });
    expect((await answer(c, 'done')).status).to.equal(410);
  });

  it('on_challenge ask_human: a captcha becomes a request for a person, and the step is judged again after Done', async () => {
    site.reset();
    const halted = await start({ steps: [{ intent: 'open the catalogue', type: 'navigate', url: `${site.url}/guarded`, required: true }] });
    expect(await ended(halted)).to.include({ status: 'failed', halt_class: 'cf_challenge' });
    const id = await start({ steps: [{ intent: 'open the catalogue', type: 'navigate', url: `${site.url}/guarded`, required: true }], runtime: { on_challenge: 'ask_human' } });
    const ask = await requested(id);
    expect(ask).to.include({ reason: 'challenge' });
    expect(ask.message).to.match(/captcha \(perimeterx\)/);
    const c = await claim(ask.link);
    site.solve();
    await sleep(600);
    expect((await answer(c, 'done')).status).to.equal(200);
    const run = await ended(id);
    expect(run.status, JSON.stringify(run.failure_help)).to.equal('succeeded');
    const result = (await gw.req('GET', `/v1/runs/${id}/result`, { token })).body as Body;
    expect(result.steps[0].data).to.match(/cleared by a person who took over/);
  });

  it("the brain's ASK_HUMAN waits for a person when runtime.brain_may_ask_human is on, and is refused like an unknown action when off", async () => {
    fake.script = (seen) => (seen.actions === 0 ? { call: { action: 'ASK_HUMAN', message: 'please accept the cookie wall', reasoning: 'stuck' } } : { call: { action: 'DONE', success: true, reasoning: 'done' } });
    try {
      const plan = (allowed: boolean) => ({ steps: [{ intent: 'open the sign-in page', type: 'navigate', url: `${site.url}/login` }, { intent: 'get past the wall', type: 'default-cua', max_steps: 3, required: true }], runtime: { brain_may_ask_human: allowed } });
      const offered = (): string[] => (fake.requests.at(-1)!.body as Body).tools?.[0]?.function?.parameters?.properties?.action?.enum ?? [];
      fake.requests.length = 0;
      const id = await start(plan(true));
      const ask = await requested(id);
      expect(ask).to.include({ reason: 'brain', message: 'please accept the cookie wall' });
      // the act tool offers ASK_HUMAN only to a run that allows it
      expect(offered()).to.include('ASK_HUMAN');
      await answer(await claim(ask.link), 'done');
      expect((await ended(id)).status).to.equal('succeeded');
      fake.requests.length = 0;
      const refused = await start(plan(false));
      const run = await ended(refused);
      expect(offered()).to.include('CLICK').and.not.include('ASK_HUMAN');
      expect(run.status).to.equal('failed');
      const result = (await gw.req('GET', `/v1/runs/${refused}/result`, { token })).body as Body;
      expect(result.steps[1].data).to.match(/unknown action "ASK_HUMAN"/);
      expect((await events(refused)).some((e) => e.type === 'takeover_requested')).to.equal(false);
    } finally {
      fake.script = undefined;
    }
  });
});
