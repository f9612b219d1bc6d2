import { expect } from 'chai';
import { mkdir, mkdtemp, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { RUNNER_ENV, startGateway, newToken, type TestGateway } from '../support/gateway.ts';
import { startCuaSite, type CuaSite } from '../fixtures/cua/site.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../fixtures/cua/anthropic.ts';
import { startFakeOpenAi, type FakeOpenAi } from '../fixtures/cua/openai.ts';
import { PERSON, anthropicFailures, openAiFailures } from '../fixtures/cua/scripts.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Every file under a directory, recursively. */
async function files(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await files(p)));
    else if (e.isFile()) out.push(p);
  }
  return out;
}

describe("computer-use brain protocols in real runs (Anthropic's and OpenAI's wire formats, real agents, real Chromium)", function () {
  this.timeout(180_000);
  const token = newToken();
  const tenantKey = `sk-tenant-${randomBytes(16).toString('hex')}`;
  let site: CuaSite;
  let claude: FakeAnthropic;
  let gpt: FakeOpenAi;
  let gw: TestGateway;

  before(async () => {
    [site, claude, gpt] = await Promise.all([startCuaSite(), startFakeAnthropic(anthropicFailures), startFakeOpenAi(openAiFailures)]);
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-cua-'));
    const file = path.join(dir, 'brains.json');
    await mkdir(path.join(dir, 'secrets'));
    await writeFile(path.join(dir, 'secrets', 'model_provider_api_key'), `${tenantKey}\n`);
    await writeFile(
      file,
      JSON.stringify({
        brains: {
          'claude-cua': { protocol: 'anthropic-computer', base_url: claude.url, model: 'claude-sonnet-4-5', price_per_mtok_in: 3, price_per_mtok_out: 15, max_retries: 1 },
          'openai-cua': { protocol: 'openai-computer', base_url: gpt.url, model: 'computer-use-preview', price_per_mtok_in: 3, price_per_mtok_out: 12, max_retries: 1 },
        },
      }),
    );
    gw = await startGateway({ dir, env: { ...RUNNER_ENV, SERVICE_BRAINS_PATH: file }, keys: { [token]: { tenant_id: 'cua', rate_limit_per_minute: 0, default_compute_backend: 'dom_plane' } } });
  });
  after(async () => {
    await gw?.close();
    await Promise.all([site?.close(), claude?.close(), gpt?.close()]);
  });

  async function run(model: string, intent: string, extra: Body = {}): Promise<Body> {
    const plan = [
      { intent: 'open the form', type: 'navigate', url: `${site.url}/form`, required: true },
      { intent, type: 'default-cua', max_steps: 8, required: true },
    ];
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: false, cua_model: model, ...extra } });
    expect(r.status, r.text).to.equal(200);
    const life = await gw.req('GET', `/v1/runs/${r.body.run_id}`, { token });
    return { ...r.body, life: life.body };
  }

  for (const backend of ['dom_plane', 'computer_plane'] as const) {
    it(`anthropic-computer fills and submits the form on ${backend}: tool_result screenshots answer each tool_use, the tenant's key and the beta header`, async () => {
      claude.calls.length = 0;
      const before = site.submissions.length;
      const r = await run('claude-cua', `sign up as ${PERSON.name} (${backend})`, { compute_backend: backend });
      expect(r.status, JSON.stringify(r.steps.map((s: Body) => s.data))).to.equal('succeeded');
      expect(site.submissions.slice(before)).to.deep.equal([PERSON]);
      // screenshot, click+type, click, type, click, the stop: six calls, each answering all of the last answer's tool_uses
      expect(claude.calls.map((c) => c.turn)).to.deep.equal([0, 1, 2, 3, 4, 5]);
      for (const c of claude.calls) {
        expect(c.key).to.equal(tenantKey);
        expect(c.headers['anthropic-beta']).to.equal('computer-use-2025-01-24');
        expect(c.body.model).to.equal('claude-sonnet-4-5');
        expect(c.body.tools).to.deep.equal([{ type: 'computer_20250124', name: 'computer', display_width_px: 1280, display_height_px: 720 }]);
        expect(c.image, 'every call carries the latest screen').to.include({ width: 1280, height: 720 });
      }
      // the click and the typing of one answer: two tool_results, in order, in one user message
      const third = claude.calls[2]!.body.messages as Body[];
      const uses = (third[3]!.content as Body[]).filter((b) => b.type === 'tool_use').map((b) => b.id);
      const results = third[4]!.content as Body[];
      expect(results.map((b) => b.tool_use_id)).to.deep.equal(uses);
      expect(results.every((b) => b.type === 'tool_result' && b.content[0].type === 'image' && b.content[0].source.media_type === 'image/png')).to.equal(true);
      const step = r.steps[1] as Body;
      expect(step.last_action).to.deep.include({ type: 'DONE' });
      expect(step.last_action.reasoning).to.match(/The form is submitted/);
      // priced from the API's usage: 6 calls of 1500 in at 3 USD/Mtok and 60 out at 15 USD/Mtok
      expect(r.summary).to.include(`cost ${((6 * (1500 * 3 + 60 * 15)) / 1e6).toFixed(4)} USD`);
    });

    it(`openai-computer fills and submits the form on ${backend}: computer_call_output chained by previous_response_id`, async () => {
      gpt.calls.length = 0;
      const before = site.submissions.length;
      const r = await run('openai-cua', `sign up as ${PERSON.name} (${backend})`, { compute_backend: backend });
      expect(r.status, JSON.stringify(r.steps.map((s: Body) => s.data))).to.equal('succeeded');
      expect(site.submissions.slice(before)).to.deep.equal([PERSON]);
      expect(gpt.calls.map((c) => c.turn)).to.deep.equal([0, 1, 2, 3, 4, 5, 6]);
      for (const [i, c] of gpt.calls.entries()) {
        expect(c.headers.authorization).to.equal(`Bearer ${tenantKey}`);
        expect(c.body.model).to.equal('computer-use-preview');
        expect(c.body.truncation).to.equal('auto');
        // 1280x720: the short side is within 768 already, so the display is the screen
        expect(c.body.tools).to.deep.equal([{ type: 'computer_use_preview', display_width: 1280, display_height: 720, environment: 'browser' }]);
        expect(c.image).to.include({ width: 1280, height: 720 });
        if (i === 0) {
          expect(c.body.previous_response_id).to.equal(undefined);
          continue;
        }
        expect(c.body.previous_response_id).to.match(/^resp_/);
        expect(c.body.input).to.have.length(1);
        expect(c.body.input[0]).to.include({ type: 'computer_call_output' });
        expect(c.body.input[0].output.type).to.equal('computer_screenshot');
        expect(c.body.input[0].output.image_url).to.match(/^data:image\/png;base64,/);
        expect(c.body.input[0]).to.not.have.property('acknowledged_safety_checks');
      }
      expect(r.summary).to.include(`cost ${((7 * (1200 * 3 + 40 * 12)) / 1e6).toFixed(4)} USD`);
    });
  }

  const help = (r: Body) => r.life.failure_help as Body;

  it('refusals end the step as the model giving up; failure_help names the backend and what to do', async () => {
    for (const [model, protocol] of [
      ['claude-cua', 'anthropic-computer'],
      ['openai-cua', 'openai-computer'],
    ] as const) {
      const r = await run(model, 'refuse to do this');
      expect(r.status).to.equal('failed');
      expect(r.steps[1]).to.include({ success: false, failure_class: 'brain_loop_exhausted' });
      expect(r.steps[1].attempts, 'a refusal is not retried').to.equal(1);
      expect(help(r).likely_causes[0]).to.match(new RegExp(`^brain ${model} \\(${protocol} at 127\\.0\\.0\\.1:\\d+\\) declined the task`));
      expect(help(r).next_steps[0]).to.match(/^reword the step's intent/);
    }
  });

  for (const [what, word, klass, cause, attempts] of [
    ['429 with retry-after', 'ratelimit', 'model_provider_unreachable', /is rate limited: HTTP 429 .*after 2 attempts \(retry-after 1 s\)/, 2],
    ['overloaded (Anthropic 529, OpenAI 503)', 'overload', 'model_provider_unreachable', /is overloaded: HTTP 529 overloaded_error after 2 attempts|failed: HTTP 503 .*after 2 attempts/, 2],
    ['401', 'badkey', 'model_provider_unreachable', /refused the key: HTTP 401/, 1],
    ['403', 'forbidden', 'model_provider_unreachable', /denied access: HTTP 403/, 1],
  ] as const) {
    it(`${what}: halts model_provider_unreachable, failure_help names the backend and what to do`, async () => {
      for (const [model, protocol, fake] of [
        ['claude-cua', 'anthropic-computer', claude],
        ['openai-cua', 'openai-computer', gpt],
      ] as const) {
        fake.calls.length = 0;
        const r = await run(model, `${word} this task`);
        expect(r.status).to.equal('failed');
        expect(r.life.halt_class).to.equal(klass);
        expect(help(r).likely_causes[0]).to.match(new RegExp(`^brain ${model} \\(${protocol} at 127\\.0\\.0\\.1:\\d+\\) `));
        expect(help(r).likely_causes[0]).to.match(cause);
        expect(help(r).next_steps[0]).to.be.a('string').and.not.equal('retry with exponential backoff (5 s, 30 s, 2 min)');
        // the SDK's own retries (max_retries 1), then the run stops: it does not hammer the provider
        expect(fake.calls.length, `${model} calls`).to.equal(attempts);
      }
    });
  }

  it("a conversation past the model's context fails the step budget_exceeded, not retried", async () => {
    for (const model of ['claude-cua', 'openai-cua']) {
      const r = await run(model, 'toolong task');
      expect(r.status).to.equal('failed');
      expect(r.steps[1]).to.include({ success: false, failure_class: 'budget_exceeded', attempts: 1 });
      expect(help(r).likely_causes[0]).to.match(new RegExp(`^brain ${model} .*longer than the model's context`));
      expect(help(r).next_steps[0]).to.match(/split the step/);
    }
  });

  it('pending safety checks are never acknowledged: the run halts safety_check_pending before the plane acts', async () => {
    gpt.calls.length = 0;
    const before = site.submissions.length;
    const r = await run('openai-cua', 'unsafe click on sign up');
    expect(r.status).to.equal('failed');
    expect(r.life.halt_class).to.equal('safety_check_pending');
    expect(r.steps[1]).to.include({ success: false, attempts: 1 });
    expect(r.steps[1].data).to.match(/malicious_instructions/);
    expect(help(r).likely_causes[0]).to.match(/^brain openai-cua \(openai-computer at .*\) asked for a person to acknowledge 1 pending safety check/);
    expect(site.submissions.length, 'the click was not performed').to.equal(before);
    expect(gpt.calls).to.have.length(1);
    expect(JSON.stringify(gpt.calls.map((c) => c.body))).to.not.include('acknowledged_safety_checks');
  });

  it('a run that lets its brain ask for a person: the safety check becomes a takeover, Done acknowledges it with the next output, and the form is submitted', async () => {
    gpt.calls.length = 0;
    const before = site.submissions.length;
    const plan = {
      steps: [
        { intent: 'open the form', type: 'navigate', url: `${site.url}/form`, required: true },
        { intent: `careful sign up as ${PERSON.name}`, type: 'default-cua', max_steps: 10, required: true },
      ],
      runtime: { brain_may_ask_human: true },
    };
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: true, cua_model: 'openai-cua' } });
    expect(r.status, r.text).to.equal(200);
    const id = r.body.run_id as string;
    let asked: Body | undefined;
    const events = async (): Promise<Body[]> => (await gw.req('GET', `/v1/runs/${id}/events`, { token })).body.events as Body[];
    for (let i = 0; i < 600 && !asked; i++) {
      asked = (await events()).find((e) => e.type === 'takeover_requested')?.data as Body | undefined;
      if (!asked) await new Promise((res) => setTimeout(res, 100));
    }
    expect(asked, JSON.stringify((await gw.req('GET', `/v1/runs/${id}`, { token })).body).slice(0, 3000)).to.not.equal(undefined);
    expect(asked!.message).to.match(/acknowledge 1 safety check.*irrelevant_domain/);
    // nothing acknowledged before the person pressed Done
    expect(JSON.stringify(gpt.calls.map((c) => c.body))).to.not.include('acknowledged_safety_checks');
    const link = asked!.link as string;
    const claimed = await gw.req('POST', '/v1/takeover/claim', { body: { token: link.slice(link.indexOf('#') + 1) } });
    expect(claimed.status, claimed.text).to.equal(200);
    const done = await gw.req('POST', `/v1/takeover/${claimed.body.takeover_id}/done`, { headers: { 'x-takeover-claim': claimed.body.claim }, body: {} });
    expect(done.status, done.text).to.equal(200);
    let life: Body = {};
    for (let i = 0; i < 900 && !['succeeded', 'failed', 'cancelled'].includes(life.status); i++) {
      life = (await gw.req('GET', `/v1/runs/${id}`, { token })).body as Body;
      if (!['succeeded', 'failed', 'cancelled'].includes(life.status)) await new Promise((res) => setTimeout(res, 100));
    }
    expect(life.status, JSON.stringify(life.steps?.map((s: Body) => s.data))).to.equal('succeeded');
    expect(site.submissions.slice(before)).to.deep.equal([PERSON]);
    const acked = gpt.calls.map((c) => (c.body.input as Body[] | undefined)?.find((i) => i.acknowledged_safety_checks)).filter(Boolean) as Body[];
    expect(acked).to.have.length(1);
    expect(acked[0]!.acknowledged_safety_checks.map((s: Body) => s.code)).to.deep.equal(['irrelevant_domain']);
  });

  it("the tenant's key is in no log line, no file of the data dir and no answer; screenshots are not in the logs", async () => {
    const log = gw.logs.join('\n');
    expect(log.length).to.be.above(1000);
    expect(log).to.not.include(tenantKey);
    // base64 of a PNG or a JPEG: the screenshots go to the model and the trace's observation, never to a log line
    expect(log).to.not.match(/iVBORw0KGgo|\/9j\/4/);
    const secret = path.join(gw.dir, 'secrets');
    for (const f of await files(gw.dir)) {
      if (f.startsWith(secret) || (await stat(f)).size > 50_000_000) continue;
      expect((await readFile(f)).includes(tenantKey), f).to.equal(false);
    }
    const runs = await gw.req('GET', '/v1/runs?limit=50', { token });
    expect(runs.text).to.not.include(tenantKey);
    // the model io of the trace holds the turn, never the key or an image
    const trace = await files(path.join(gw.dir, 'runs', 'cua'));
    const io = trace.filter((f) => f.includes(`${path.sep}modelio${path.sep}`));
    expect(io.length).to.be.above(5);
    for (const f of io) {
      const text = await readFile(f, 'utf8');
      expect(text).to.not.include(tenantKey);
      expect(text).to.not.match(/iVBORw0KGgo|\/9j\/4/);
    }
  });
});
