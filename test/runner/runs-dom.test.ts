import { expect } from 'chai';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { startGateway, newToken, sleep, type TestGateway, until } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';
import { freePort } from '../support/redis.ts';
import { validateBundle } from '../../sdk/index.ts';
import { WebSocket } from 'ws';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { builtPath } from '../../shared/build.mjs';

const run = promisify(execFile);

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('runs end to end on dom_plane (real agent, real Chromium)', function () {
  this.timeout(120_000);
  let gw: TestGateway;
  let site: Site;
  let other: Site;
  const token = newToken();
  const otherToken = newToken();

  before(async () => {
    other = await startSite();
    site = await startSite(`${other.url}/`);
    gw = await startGateway({
      env: { SERVICE_RUNNER: 'on', SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1', SERVICE_MAX_ACTIVE_RUNS: '2' },
      keys: {
        [token]: { tenant_id: 'e2e', rate_limit_per_minute: 0, max_concurrent_runs: 10, default_compute_backend: 'dom_plane' },
        [otherToken]: { tenant_id: 'intruder' },
      },
    });
  });
  after(async () => {
    await gw.close();
    await site.close();
    await other.close();
  });

  async function runToEnd(plan: unknown, extra: Body = {}): Promise<Body> {
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: false, ...extra } });
    expect(r.status, r.text).to.equal(200);
    const life = await gw.req('GET', `/v1/runs/${r.body.run_id}`, { token });
    return { ...r.body, life: life.body };
  }

  it('extracts rows across pages with loop + paginate, and saves rows JSON and CSV', async () => {
    const plan = {
      steps: [
        { intent: 'open the listings', type: 'navigate', url: `${site.url}/list?page=1`, required: true },
        {
          intent: 'read every page',
          type: 'loop',
          loop_count: 10,
          steps: [
            { intent: 'read the cards', type: 'extract_data', extract: { schema_name: 'flats', item_selector: '.card', max_items: 50, fields: [{ name: 'title', type: 'str', selector: 'h2', required: true }, { name: 'url', type: 'str', selector: 'a.link', attr: 'href' }, { name: 'price', type: 'float', selector: '.price' }] } },
            { intent: 'go to the next page', type: 'paginate' },
          ],
        },
      ],
    };
    const r = await runToEnd(plan);
    expect(r.status, JSON.stringify(r)).to.equal('succeeded');
    const rows = (await gw.req('GET', `/v1/runs/${r.run_id}/artifacts/extracted_rows.json`, { token })).body as Body[];
    expect(rows).to.have.length(9);
    expect(rows[0]).to.deep.equal({ title: 'Flat 1', url: `${site.url}/item/1`, price: 100.5 });
    expect(rows[8]!.title).to.equal('Flat 9');
    const csv = await readFile(path.join(gw.dir, 'runs', 'e2e', r.run_id, 'flats.csv'), 'utf8');
    expect(csv.split('\r\n')[0]).to.equal('title,url,price');
    expect(csv.trim().split('\r\n')).to.have.length(10);
    expect(r.extraction_quality.unknown_placeholder_row_count).to.equal(0);
    expect(site.hits.get('/list')).to.be.greaterThanOrEqual(3);
  });

  it('fills and submits a form whose success contract holds', async () => {
    const r = await runToEnd([
      { intent: 'open the form', type: 'navigate', url: `${site.url}/form` },
      { intent: 'enter the email', type: 'fill_field', params: { label: 'Email', value: 'ada@example.com' } },
      { intent: 'enter the name', type: 'fill_field', params: { label: 'Full name', aliases: ['Name'], value: 'Ada' } },
      { intent: 'send it', type: 'submit', params: { label: 'Send' }, hints: { expect_url_contains: ['/success', 'name=Ada'] }, required: true },
      { intent: 'read the greeting', type: 'extract_url' },
    ]);
    expect(r.status, JSON.stringify(r.steps)).to.equal('succeeded');
    expect(r.steps[3]).to.include({ type: 'submit', success: true });
    expect(r.steps[3].final_url).to.match(/\/success\?email=ada%40example\.com&name=Ada$/);
    expect(r.steps[4].final_url).to.include('/success');
    expect(r.steps[4].page_title).to.equal('Thanks');
  });

  it('confirms an in-place submit by expect_text_present instead of demoting it', async () => {
    const r = await runToEnd([
      { intent: 'open settings', type: 'navigate', url: `${site.url}/inplace` },
      { intent: 'type a nickname', type: 'type_text', params: { selector: '#nick', text: 'ace' } },
      { intent: 'save', type: 'submit', params: { label: 'Save' }, hints: { expect_text_present: 'Saved!' }, required: true },
    ]);
    expect(r.status, JSON.stringify(r.steps)).to.equal('succeeded');
  });

  it('demotes a click that breaks expect_url_contains to wrong_target and halts a required step with failure_help', async () => {
    const r = await runToEnd([
      { intent: 'open the form', type: 'navigate', url: `${site.url}/form` },
      { intent: 'send it', type: 'submit', params: { label: 'Send' }, hints: { expect_url_contains: '/nowhere' }, required: true },
      { intent: 'never reached', type: 'wait', seconds: 0 },
    ]);
    expect(r.status).to.equal('failed');
    expect(r.life).to.include({ phase: 'halted', halt_class: 'navigation_drift' });
    expect(r.steps).to.have.length(2);
    const failed = r.steps[1];
    expect(failed).to.include({ success: false, failure_class: 'wrong_target', page_title: 'Thanks' });
    expect(failed.final_url).to.include('/success');
    expect(failed.last_action.type).to.equal('CLICK');
    expect(Buffer.from(failed.screenshot_b64, 'base64').subarray(1, 4).toString()).to.equal('PNG');
    expect(r.life.failure_help.debug_surfaces.status).to.equal(`/v1/runs/${r.run_id}/status`);
  });

  it('maps a 404 to http_4xx without retrying it, and halts a required navigate with navigate_failed', async () => {
    const before = site.hits.get('/missing') ?? 0;
    const r = await runToEnd([{ intent: 'open a missing page', type: 'navigate', url: `${site.url}/missing`, required: true }]);
    expect(r.status).to.equal('failed');
    expect(r.error).to.equal('navigation_blocked');
    expect(r.life.halt_class).to.equal('navigate_failed');
    expect(r.steps[0]).to.include({ failure_class: 'http_4xx', attempts: 1 });
    expect((site.hits.get('/missing') ?? 0) - before).to.equal(1);
  });

  it('halts with loop_stuck when iterations keep showing the same page', async () => {
    const r = await runToEnd({
      steps: [
        { intent: 'open a page that never changes', type: 'navigate', url: `${site.url}/static` },
        { intent: 'keep looking', type: 'loop', loop_count: 20, steps: [{ intent: 'look again', type: 'wait', seconds: 0.05 }] },
      ],
      runtime: { state_repeat_threshold: 3 },
    });
    expect(r.status).to.equal('failed');
    expect(r.life.halt_class).to.equal('loop_stuck');
    expect(r.life.failure_help.summary).to.match(/same page/);
    expect(r.steps.filter((s: Body) => s.type === 'wait')).to.have.length(3);
  });

  it('halts with off_source_drift after too many steps off the pinned origin', async () => {
    const r = await runToEnd({
      steps: [
        { intent: 'open the source', type: 'navigate', url: `${site.url}/offsite` },
        { intent: 'follow the link away', type: 'click', params: { selector: '#away' } },
        { intent: 'wait there', type: 'wait', seconds: 0 },
        { intent: 'and wait more', type: 'wait', seconds: 0 },
        { intent: 'never reached', type: 'wait', seconds: 0 },
      ],
      runtime: { pinned_source_url_pattern: site.url, off_source_step_budget: 1 },
    });
    expect(r.life.halt_class, JSON.stringify(r.steps)).to.equal('off_source_drift');
    expect(r.steps).to.have.length(3);
  });

  it('fails a gate whose verification does not hold with gate_failed', async () => {
    const r = await runToEnd([
      { intent: 'open settings', type: 'navigate', url: `${site.url}/inplace`, section: 'setup' },
      { intent: 'save without a change', type: 'submit', params: { label: 'Save' }, hints: { expect_text_present: 'Stored in the cloud' }, gate: true, section: 'setup' },
      { intent: 'extraction section', type: 'extract_url', section: 'extraction' },
    ]);
    expect(r.status).to.equal('failed');
    expect(r.error).to.equal('gate_failed');
    expect(r.life.halt_class).to.equal('gate_failed');
    expect(r.steps.map((s: Body) => s.type)).to.deep.equal(['navigate', 'submit']);
  });

  it('captures a link opened in a new tab and returns to the source tab', async () => {
    const r = await runToEnd([
      { intent: 'open the links page', type: 'navigate', url: `${site.url}/newtab` },
      { intent: 'capture the link', type: 'capture_link_in_new_tab', source_selector: '#out', emit: 'current_url_title' },
      { intent: 'where am I', type: 'extract_url' },
    ]);
    expect(r.status, JSON.stringify(r.steps)).to.equal('succeeded');
    const rows = (await gw.req('GET', `/v1/runs/${r.run_id}/artifacts/extracted_rows.json`, { token })).body as Body[];
    expect(rows[0]).to.deep.equal({ url: `${site.url}/list?page=2`, title: 'Listings page 2' });
    expect(rows[1]!.url).to.equal(`${site.url}/newtab`);
  });

  it('cancels a running run: halt class cancelled, slot released, events to the end', async () => {
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan: [{ intent: 'open', type: 'navigate', url: `${site.url}/static` }, { intent: 'wait long', type: 'wait', seconds: 60 }] } });
    const id = r.body.run_id;
    for (let i = 0; i < 200; i++) {
      const s = await gw.req('GET', `/v1/runs/${id}/events`, { token });
      if (s.body.events.some((e: Body) => e.type === 'step.started' && e.data.type === 'wait')) break;
      await sleep(50);
    }
    // the answer is the run as the cancel left it: ended, or still closing its browser (phase cancelling)
    const answer = (await gw.req('POST', `/v1/runs/${id}/cancel`, { token })).body as Body;
    expect(answer.status === 'cancelled' || answer.phase === 'cancelling', JSON.stringify(answer)).to.equal(true);
    if (answer.status === 'cancelled') expect(answer.halt_class).to.equal('cancelled');
    let status: Body = {};
    for (let i = 0; i < 200 && !['cancelled', 'failed', 'succeeded'].includes(status.status); i++) {
      status = (await gw.req('GET', `/v1/runs/${id}`, { token })).body;
      await sleep(50);
    }
    expect(status).to.include({ status: 'cancelled', halt_class: 'cancelled' });
    expect(await until(async () => (await gw.gateway.services.limits.runningCount('e2e')) === 0, 5_000), 'the slot is released (just after the end commits)').to.equal(true);
  });

  it('demotes a click that changes nothing to no_state_change, and keeps one that changes the page text', async () => {
    const r = await runToEnd([
      { intent: 'open a page that never changes', type: 'navigate', url: `${site.url}/static` },
      { intent: 'click the heading', type: 'click', params: { selector: 'h1' } },
      { intent: 'open the counter', type: 'navigate', url: `${site.url}/counter` },
      { intent: 'hit it', type: 'click', params: { selector: '#hit' } },
    ]);
    expect(r.steps[1]).to.include({ success: false, failure_class: 'no_state_change', attempts: 2 });
    expect(r.steps[3]).to.include({ success: true, attempts: 1 });
  });

  it('halts with time_cap when the run outlives max_time_minutes, and releases its slot', async () => {
    // (15 s: the cap counts from the run's start, plane included, and a loaded CI host once took 6 s to the first step's end)
    const r = await runToEnd([{ intent: 'open', type: 'navigate', url: `${site.url}/static` }, { intent: 'wait too long', type: 'wait', seconds: 60 }], { max_time_minutes: 0.25 });
    expect(r.status).to.equal('failed');
    expect(r.life.halt_class).to.equal('time_cap');
    expect(r.life.failure_help.halt_class).to.equal('time_cap');
    expect(r.life.limits.max_time_minutes).to.equal(0.25);
    expect(await until(async () => (await gw.gateway.services.limits.runningCount('e2e')) === 0, 5_000), 'the slot is released (just after the end commits)').to.equal(true);
    // the wait the cap interrupted has its entry, with the page it was on
    expect(r.steps).to.have.length(2);
    expect(r.steps[1]).to.include({ type: 'wait', success: false, failure_class: 'budget_exceeded', final_url: `${site.url}/static`, page_title: 'Static' });
    expect(r.steps[1].data).to.match(/^halted \(time_cap\)/);
    expect(r.steps[1].screenshot_b64).to.be.a('string');
  });

  it('gives a run whose steps all failed (none required) a halt class and failure_help', async () => {
    const dead = `http://127.0.0.1:${await freePort()}/`;
    const r = await runToEnd([{ intent: 'open a site that is down', type: 'navigate', url: dead }]);
    expect(r.status).to.equal('failed');
    expect(r.life.halt_class).to.equal('navigate_failed');
    expect(r.life.failure_help).to.include({ halt_class: 'navigate_failed' });
    expect(r.life.failure_help.debug_surfaces.events).to.equal(`/v1/runs/${r.run_id}/events`);
    const waits = await runToEnd([{ intent: 'click nothing', type: 'click', params: { selector: '#nope' } }]);
    expect(waits.life.halt_class).to.equal('all_steps_failed');
    expect(waits.life.failure_help.summary).to.match(/Every step/);
  });

  it("serves the trace to a client told of the run's end at once, though the runner has not yet heard back from the end's commit", async () => {
    // the end's commit wakes the waiting predict; the releases that follow it are held back
    const runs = gw.gateway.services.runs as unknown as { releaseHolds: (...a: unknown[]) => Promise<boolean> };
    const release = runs.releaseHolds;
    runs.releaseHolds = async (...a) => {
      const held = await release.apply(runs, a);
      await sleep(600);
      return held;
    };
    try {
      const r = await runToEnd([{ intent: 'open', type: 'navigate', url: `${site.url}/static` }]);
      expect(r.status, r.summary).to.equal('succeeded');
      const trace = await gw.req('GET', `/v1/runs/${r.run_id}/trace`, { token });
      expect(trace.status, 'the bundle is written').to.equal(200);
      expect(trace.body.files.map((f: Body) => f.path)).to.include('trace.json');
    } finally {
      runs.releaseHolds = release;
    }
  });

  it("records each step's post screenshot as that step left the page, though the next step's writes do not wait for it", async () => {
    const r = await runToEnd([{ intent: 'open the tally', type: 'navigate', url: `${site.url}/tally` }, ...Array.from({ length: 4 }, (_, i) => ({ intent: `hit ${i + 1}`, type: 'click', params: { selector: '#hit' } }))]);
    expect(r.status, r.summary).to.equal('succeeded');
    expect((await gw.req('GET', `/v1/runs/${r.run_id}/trace`, { token })).status, 'the bundle is written').to.equal(200);
    const shot = async (i: number, kind: 'pre' | 'post') => readFile(path.join(gw.dir, 'runs', 'e2e', r.run_id, 'trace', 'screenshots', `${String(i).padStart(4, '0')}_${kind}.png`));
    const posts = await Promise.all([1, 2, 3, 4].map((i) => shot(i, 'post')));
    // each click moved the counter on by one: four different pictures, none taken after the next click
    expect(new Set(posts.map((p) => p.toString('base64'))).size).to.equal(4);
    for (let i = 1; i < 4; i++) expect((await shot(i + 1, 'pre')).equals(posts[i - 1]!), `pre of step ${i + 1} is the post of step ${i}`).to.equal(true);
    expect((await shot(1, 'pre')).equals(posts[0]!)).to.equal(false);
  });

  it('records the post screenshot of a click whose effect shows late as the page it changed to, not as it was when the click returned', async () => {
    const r = await runToEnd([
      { intent: 'open the slow tally', type: 'navigate', url: `${site.url}/slow-tally` },
      { intent: 'hit it', type: 'click', params: { selector: '#hit' } },
    ]);
    expect(r.status, r.summary).to.equal('succeeded');
    expect(r.steps[1]).to.include({ success: true, attempts: 1 });
    expect((await gw.req('GET', `/v1/runs/${r.run_id}/trace`, { token })).status, 'the bundle is written').to.equal(200);
    const shot = async (i: number, kind: 'pre' | 'post') => readFile(path.join(gw.dir, 'runs', 'e2e', r.run_id, 'trace', 'screenshots', `${String(i).padStart(4, '0')}_${kind}.png`));
    // the click's pre shows 0; its post, taken once the looks saw the page change, shows 1
    expect((await shot(1, 'pre')).equals(await shot(0, 'post'))).to.equal(true);
    expect((await shot(1, 'post')).equals(await shot(1, 'pre')), 'the post is the changed page').to.equal(false);
  });

  it('records a run that asked for capture_mode trace without the screenshots of the steps that passed, and still shows its failed step', async () => {
    const r = await runToEnd(
      [
        { intent: 'open the tally', type: 'navigate', url: `${site.url}/tally` },
        { intent: 'hit it', type: 'click', params: { selector: '#hit' } },
        { intent: 'press what is not there', type: 'click', params: { selector: '#nowhere' } },
      ],
      { capture_mode: 'trace' },
    );
    expect(r.steps.map((s: Body) => s.success)).to.deep.equal([true, true, false]);
    // the result keeps the spec's post-failure screenshot, whatever the trace records
    expect(Buffer.from(r.steps[2].screenshot_b64 as string, 'base64').subarray(1, 4).toString()).to.equal('PNG');
    const t = await gw.req('GET', `/v1/runs/${r.run_id}/trace`, { token });
    expect(t.status, t.text).to.equal(200);
    expect(t.body.manifest.capture_mode).to.equal('trace');
    const files: string[] = t.body.files.map((f: Body) => f.path);
    expect(files.filter((f) => f.startsWith('steps/'))).to.have.length(3);
    // no screenshot of a step that passed; the failed step's own (taken for the result anyway) is kept
    expect(files.filter((f) => f.startsWith('screenshots/')), files.join(' ')).to.deep.equal(['screenshots/0002_post.png']);
    expect(await validateBundle(path.join(gw.dir, 'runs', 'e2e', r.run_id, 'trace'))).to.deep.equal([]);
  });

  it('records the run as a trace bundle that validates and reads back with its screenshots, decisions and side effect', async () => {
    const r = await runToEnd([
      { intent: 'open the form', type: 'navigate', url: `${site.url}/form` },
      { intent: 'enter the name', type: 'fill_field', params: { label: 'Name', value: 'Grace' } },
      { intent: 'send it', type: 'submit', params: { label: 'Send' }, hints: { expect_url_contains: ['/success'] } },
    ]);
    expect(r.status).to.equal('succeeded');
    const t = await gw.req('GET', `/v1/runs/${r.run_id}/trace`, { token });
    expect(t.status, t.text).to.equal(200);
    expect(t.body.run_id).to.equal(r.run_id);
    expect(t.body.manifest.run_id).to.equal(r.run_id);
    expect(t.body.ingest).to.deep.equal({ manifest_url: `/trace/api/v1/runs/${r.run_id}/manifest.json`, trace_url: `/trace/api/v1/runs/${r.run_id}/trace.json` });
    expect(await validateBundle(path.join(gw.dir, 'runs', 'e2e', r.run_id, 'trace'))).to.deep.equal([]);
    // the bundle is written after the run's result was recorded, off its critical path (the trace route waited for it)
    const written = (await stat(path.join(gw.dir, 'runs', 'e2e', r.run_id, 'trace', 'manifest.json'))).mtimeMs;
    expect(written).to.be.at.least(Date.parse(r.life.ended_at));

    const trace = (await gw.req('GET', `/v1/runs/${r.run_id}/trace/trace.json`, { token })).body;
    expect(trace.session.status).to.equal('passed');
    expect(trace.steps.map((s: Body) => [s.step_type, s.status])).to.deep.equal([['navigate', 'passed'], ['fill_field', 'passed'], ['submit', 'passed']]);
    expect(trace.steps[2].verdict).to.include({ status: 'passed' });
    expect(trace.steps[2].observation.post).to.equal('screenshots/0002_post.png');

    const png = await gw.req('GET', `/v1/runs/${r.run_id}/trace/screenshots/0002_post.png`, { token });
    expect(png.status).to.equal(200);
    expect(png.headers.get('content-type')).to.equal('image/png');
    const files: string[] = t.body.files.map((f: Body) => f.path);
    expect(files).to.include('screenshots/0000_pre.png');
    const effect = files.find((f) => f.startsWith('side_effects/0002-'));
    expect(effect, files.join(' ')).to.be.a('string');
    expect((await gw.req('GET', `/v1/runs/${r.run_id}/trace/${effect}`, { token })).body).to.include({ state: 'committed', action: 'submit' });
    const events = (await gw.req('GET', `/v1/runs/${r.run_id}/trace/events/0002.jsonl`, { token })).text.trim().split('\n').map((l) => JSON.parse(l));
    expect(events.map((e: Body) => e.layer)).to.include.members(['planner', 'grounding', 'verifier']);

    // the run streamed to the mounted ingest service: a user of the tenant reads the same bytes back there
    // the operator adds a user with the ingest admin CLI, beside the running service
    await run(process.execPath, [builtPath('plugins/trace-ingest/cli.ts'), '--data-dir', path.join(gw.dir, 'plugins', 'trace-ingest', 'data'), 'user', 'create', '--email', 'ops@e2e.test', '--tenant', 'e2e'], {
      env: { ...process.env, TRACE_ADMIN_PASSWORD: 'correct horse battery' },
    });
    const login = await gw.req('POST', '/trace/api/v1/auth/login', { body: { email: 'ops@e2e.test', password: 'correct horse battery' } });
    expect(login.status, login.text).to.equal(200);
    const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
    // the stream's last records flush after the run has ended (off its critical path): the ingest copy follows shortly
    let remote = await gw.req('GET', `/trace/api/v1/runs/${r.run_id}/trace.json`, { headers: { cookie } });
    for (let i = 0; i < 100 && (remote.status !== 200 || remote.body.steps?.length !== 3); i++) {
      await sleep(100);
      remote = await gw.req('GET', `/trace/api/v1/runs/${r.run_id}/trace.json`, { headers: { cookie } });
    }
    expect(remote.status, remote.text).to.equal(200);
    expect((await gw.req('GET', `/trace/api/v1/runs/${r.run_id}/screenshots/0002_post.png`, { headers: { cookie } })).status).to.equal(200);
    const local = await readFile(path.join(gw.dir, 'runs', 'e2e', r.run_id, 'trace', 'screenshots', '0002_post.png'));
    expect(Buffer.from(await (await fetch(`${gw.url}/trace/api/v1/runs/${r.run_id}/screenshots/0002_post.png`, { headers: { cookie } })).arrayBuffer()).equals(local)).to.equal(true);
    const steps = (await gw.req('GET', `/trace/api/v1/runs/${r.run_id}/trace.json`, { headers: { cookie } })).body.steps;
    expect(steps).to.have.length(3);

    // the plane's recording is the run's video: WebM that ffprobe reads
    const video = await fetch(`${gw.url}/v1/runs/${r.run_id}/video`, { headers: { 'X-Service-Token': token } });
    expect(video.status).to.equal(200);
    expect(video.headers.get('content-type')).to.equal('video/webm');
    const webm = Buffer.from(await video.arrayBuffer());
    expect(webm.subarray(0, 4).toString('hex')).to.equal('1a45dfa3');
    const probe = await run('ffprobe', ['-v', 'error', '-show_entries', 'stream=codec_name', '-of', 'csv=p=0', path.join(gw.dir, 'runs', 'e2e', r.run_id, 'video.webm')]);
    expect(probe.stdout.trim()).to.match(/^vp[89]$/);
    expect((await gw.req('GET', `/v1/runs/${r.run_id}/video`, { token: otherToken })).status).to.equal(404);

    // another tenant's trace is 404; a path out of the bundle is 404
    expect((await gw.req('GET', `/v1/runs/${r.run_id}/trace`, { token: otherToken })).status).to.equal(404);
    expect((await gw.req('GET', `/v1/runs/${r.run_id}/trace/trace.json`, { token: otherToken })).status).to.equal(404);
    expect((await gw.req('GET', `/v1/runs/${r.run_id}/trace/..%2F..%2Fextracted_rows.json`, { token })).status).to.equal(404);
    expect((await gw.req('GET', `/v1/runs/${r.run_id}/trace/steps/..%2F..%2F..%2Fsecrets`, { token })).status).to.equal(404);
  });

  it('sends live screenshot frames to a WebSocket watcher that asks for them, beside the ordered events', async () => {
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan: [{ intent: 'open', type: 'navigate', url: `${site.url}/static` }, { intent: 'then the counter', type: 'navigate', url: `${site.url}/counter` }] } });
    const ws = new WebSocket(`${gw.url.replace('http', 'ws')}/v1/runs/${r.body.run_id}/ws?frames=1`, ['runplane.v1'], { headers: { 'X-Service-Token': token } });
    const messages: Body[] = [];
    ws.on('message', (m) => messages.push(JSON.parse(String(m)) as Body));
    await new Promise<void>((resolve) => ws.on('close', () => resolve()));
    const frames = messages.filter((m) => m.type === 'frame');
    const events = messages.filter((m) => m.type !== 'frame');
    expect(frames.map((f) => f.path)).to.include.members(['steps[0]', 'steps[1]']);
    for (const f of frames) {
      const img = Buffer.from(f.image_b64, 'base64');
      expect(f.run_id).to.equal(r.body.run_id);
      expect(img.subarray(1, 4).toString() === 'PNG' || img.subarray(0, 2).toString('hex') === 'ffd8', f.format).to.equal(true);
    }
    expect(events.map((e) => e.seq)).to.deep.equal(events.map((_e, i) => i + 1));
    expect(events.at(-1)!.type).to.equal('run.ended');
  });

  it('resumes a halted run at the step where it stopped, not from the start', async () => {
    const plan = [
      { intent: 'count once', type: 'navigate', url: `${site.url}/counter` },
      { intent: 'hit it', type: 'click', params: { selector: '#hit' } },
      { intent: 'open the page published later', type: 'navigate', url: `${site.url}/later`, required: true },
      { intent: 'read its title', type: 'extract_url' },
    ];
    const first = await runToEnd(plan, { profile_id: 'resumable' });
    expect(first.status).to.equal('failed');
    expect(first.life).to.include({ halt_class: 'navigate_failed', resume_step: 2, start_step: 0 });
    const counted = site.hits.get('/hit');

    const again = await gw.req('POST', '/v1/predict', { token, body: { action: 'resume', run_id: first.run_id, detached: false } });
    expect(again.status, again.text).to.equal(200);
    expect(again.body.status).to.equal('succeeded');
    expect(again.body.steps.map((s: Body) => s.type)).to.deep.equal(['navigate', 'extract_url']);
    expect(again.body.steps[1].page_title).to.equal('Later');
    expect(site.hits.get('/hit')).to.equal(counted);
    const life = (await gw.req('GET', `/v1/runs/${again.body.run_id}`, { token })).body;
    expect(life).to.include({ resumed_from: first.run_id, start_step: 2, resume_step: null, profile_id: 'e2e/resumable' });

    // nothing left to resume once it succeeded; unknown, running and foreign runs are refused
    const done = await gw.req('POST', '/v1/predict', { token, body: { action: 'resume', run_id: again.body.run_id } });
    expect(done.status).to.equal(409);
    expect(done.body.detail).to.match(/nothing to resume/);
    expect((await gw.req('POST', '/v1/predict', { token, body: { action: 'resume' } })).status).to.equal(400);
    expect((await gw.req('POST', '/v1/predict', { token, body: { action: 'resume', run_id: 'no-such-run' } })).status).to.equal(404);
  });
});
