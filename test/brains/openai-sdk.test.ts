// The official `openai` npm package as the client of the OpenAI-compatible
// routes: Bearer auth, streaming, models, errors it can read, no retries of a
// model that is not served, and the caller's own tools.
import { expect } from 'chai';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import sharp from 'sharp';
import { startGateway, newToken, type TestGateway } from '../support/gateway.ts';
import { deadUrl, startFakeModel, type FakeModel } from '../support/fake-model.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** What the SDK threw, or a failure when it threw nothing. */
async function thrown(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to throw');
}

describe('OpenAI SDK against the OpenAI-compatible routes (fake model server)', function () {
  this.timeout(30_000);
  const token = newToken();
  /** a tenant with one rate token a minute */
  const once = newToken();
  const BRAIN_BODY_MAX = 256 * 1024;
  let fake: FakeModel;
  let gw: TestGateway;
  let client: OpenAI;
  let shot: string;
  let brainsFile: string;

  before(async () => {
    fake = await startFakeModel();
    shot = (await sharp({ create: { width: 800, height: 500, channels: 3, background: { r: 250, g: 250, b: 250 } } }).png().toBuffer()).toString('base64');
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-openai-sdk-'));
    const file = path.join(dir, 'brains.json');
    brainsFile = file;
    await writeFile(
      file,
      JSON.stringify({
        brains: {
          'default-cua': { protocol: 'openai-chat', base_url: fake.url, model: 'fake-default' },
          'mid-cua-8b': { protocol: 'openai-chat', base_url: await deadUrl(), model: 'nobody', max_retries: 1, backoff_ms: 10 },
        },
      }),
    );
    gw = await startGateway({ env: { SERVICE_BRAINS_PATH: file, SERVICE_MAX_BRAIN_BODY_BYTES: String(BRAIN_BODY_MAX) }, keys: { [token]: { tenant_id: 'acme', rate_limit_per_minute: 0 }, [once]: { tenant_id: 'once', rate_limit_per_minute: 1 } } });
    client = new OpenAI({ apiKey: token, baseURL: `${gw.url}/v1` });
  });
  after(async () => {
    await gw.close();
    await fake.close();
  });
  beforeEach(() => {
    fake.requests.length = 0;
  });

  const messages = (task = 'press the hit button'): OpenAI.Chat.ChatCompletionMessageParam[] => [
    { role: 'system', content: 'ignored by the gateway' },
    { role: 'user', content: [{ type: 'text', text: task }, { type: 'image_url', image_url: { url: `data:image/png;base64,${shot}` } }] },
  ];
  /** Request log lines of the gateway for this path, as parsed JSON. */
  const requestLines = (p: string): Body[] =>
    gw.logs
      .map((l) => JSON.parse(l) as Body)
      .filter((l) => l.msg === 'request' && l.path === p);

  it('chat.completions.create with Authorization: Bearer answers the action as an act call', async () => {
    const c = await client.chat.completions.create({ model: 'default-cua', messages: messages() });
    expect(c.object).to.equal('chat.completion');
    expect(c.model).to.equal('default-cua');
    const call = c.choices[0]!.message.tool_calls![0]!;
    expect(call.type).to.equal('function');
    if (call.type !== 'function') return;
    expect(call.function.name).to.equal('act');
    expect(JSON.parse(call.function.arguments)).to.deep.equal({ action: 'CLICK', x: 160, y: 167 });
    expect(c.usage).to.deep.include({ prompt_tokens: 1000, completion_tokens: 50 });
  });

  it('streams with stream: true: chunks the SDK iterates, ending with the finish reason and usage', async () => {
    const stream = await client.chat.completions.create({ model: 'default-cua', messages: messages(), stream: true });
    const got: OpenAI.Chat.ChatCompletionChunk[] = [];
    for await (const chunk of stream) got.push(chunk);
    expect(got.length).to.be.greaterThanOrEqual(3);
    expect(got[0]!.choices[0]!.delta.role).to.equal('assistant');
    const args = got.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []).map((t) => t.function?.arguments ?? '').join('');
    expect(JSON.parse(args)).to.deep.equal({ action: 'CLICK', x: 160, y: 167 });
    expect(got.at(-1)!.choices[0]!.finish_reason).to.equal('tool_calls');
    expect(got.at(-1)!.usage?.total_tokens).to.equal(1050);
  });

  it('works through the platform family /production/sync/v1 with Bearer too', async () => {
    const sync = new OpenAI({ apiKey: token, baseURL: `${gw.url}/production/sync/v1` });
    const c = await sync.chat.completions.create({ model: 'default-cua', messages: messages() });
    expect(c.choices[0]!.finish_reason).to.equal('tool_calls');
  });

  it('behind GATEWAY_API_KEY: Authorization carries the platform key, the tenant token goes as X-Service-Token in defaultHeaders', async () => {
    const keyed = await startGateway({ env: { SERVICE_BRAINS_PATH: brainsFile, GATEWAY_API_KEY: 'platform-key' }, keys: { [token]: { tenant_id: 'acme', rate_limit_per_minute: 0 } } });
    try {
      const baseURL = `${keyed.url}/production/sync/v1`;
      const platform = new OpenAI({ apiKey: token, baseURL, defaultHeaders: { Authorization: 'Api-Key platform-key', 'X-Service-Token': token } });
      const c = await platform.chat.completions.create({ model: 'default-cua', messages: messages() });
      expect(c.choices[0]!.finish_reason).to.equal('tool_calls');
      // a Bearer token where the platform wants its key is refused by the platform layer, in the inner route's (OpenAI) shape
      const e = await thrown(new OpenAI({ apiKey: token, baseURL, maxRetries: 0 }).chat.completions.create({ model: 'default-cua', messages: messages() }));
      expect(e).to.be.instanceOf(OpenAI.AuthenticationError);
      expect((e as Error).message).to.equal('401 missing or invalid Authorization: Api-Key header');
      // a service route behind the platform keeps {detail}
      expect((await keyed.req('GET', '/production/sync/v1/recipes')).body).to.deep.equal({ detail: 'missing or invalid Authorization: Api-Key header' });
    } finally {
      await keyed.close();
    }
  });

  it('models.list returns the accepted ids, served: true on the configured brains; models.retrieve 404s an unknown id', async () => {
    const served: string[] = [];
    const ids: string[] = [];
    for await (const m of client.models.list()) {
      ids.push(m.id);
      if ((m as unknown as { served: boolean }).served) served.push(m.id);
    }
    expect(ids).to.deep.equal(['default-cua', 'compact-cua', 'tuned-cua', 'mid-cua-8b', 'mid-cua-32b', 'large-cua-32b', 'large-cua-72b', 'hosted-api']);
    expect(served).to.deep.equal(['default-cua', 'mid-cua-8b']);
    expect((await client.models.retrieve('default-cua')).id).to.equal('default-cua');
    expect(await client.models.retrieve('hosted-api')).to.include({ id: 'hosted-api', served: false });
    const e = await thrown(client.models.retrieve('gpt-9'));
    expect(e).to.be.instanceOf(OpenAI.NotFoundError);
  });

  it('a bad token is OpenAI.AuthenticationError with a readable message', async () => {
    const bad = new OpenAI({ apiKey: newToken(), baseURL: `${gw.url}/v1` });
    const e = await thrown(bad.chat.completions.create({ model: 'default-cua', messages: messages() }));
    expect(e).to.be.instanceOf(OpenAI.AuthenticationError);
    const err = e as InstanceType<typeof OpenAI.AuthenticationError>;
    expect(err.status).to.equal(401);
    expect(err.code).to.equal('invalid_api_key');
    expect(err.message).to.equal('401 the bearer token matches no tenant');
    expect(gw.logs.join('\n')).to.not.include(token);
    const none = await gw.req('POST', '/v1/chat/completions', { body: { model: 'default-cua', messages: messages() } });
    expect(none.status).to.equal(401);
    expect(none.headers.get('www-authenticate')).to.equal('Bearer');
    const missing = 'missing credentials: send the tenant token as Authorization: Bearer <token> or X-Service-Token';
    expect(none.body).to.deep.equal({ detail: missing, error: { message: missing, type: 'invalid_request_error', code: 'invalid_api_key', param: null } });
  });

  it('an unconfigured model is OpenAI.NotFoundError (model_not_found), and the SDK sends it exactly once', async () => {
    const before = requestLines('/v1/chat/completions').length;
    const e = await thrown(client.chat.completions.create({ model: 'large-cua-72b', messages: messages() }));
    expect(e).to.be.instanceOf(OpenAI.NotFoundError);
    const err = e as InstanceType<typeof OpenAI.NotFoundError>;
    expect(err.code).to.equal('model_not_found');
    expect(err.param).to.equal('model');
    expect(err.message).to.match(/^404 the model 'large-cua-72b' is accepted but not served by this deployment/);
    const lines = requestLines('/v1/chat/completions').slice(before);
    expect(lines.map((l) => l.status)).to.deep.equal([404]);
    expect(fake.requests).to.have.length(0);
    // an id nobody has heard of too
    expect(await thrown(client.chat.completions.create({ model: 'gpt-7', messages: messages() }))).to.be.instanceOf(OpenAI.NotFoundError);
  });

  it("an upstream failure is an APIError whose message is the gateway's text", async () => {
    const e = await thrown(client.chat.completions.create({ model: 'mid-cua-8b', messages: messages() }, { maxRetries: 0 }));
    expect(e).to.be.instanceOf(OpenAI.InternalServerError);
    const err = e as InstanceType<typeof OpenAI.APIError>;
    expect(err.status).to.equal(502);
    expect(err.type).to.equal('server_error');
    expect(err.message).to.match(/^502 brain 'mid-cua-8b': .*unreachable \(ECONNREFUSED\); gave up after 2 attempts$/);
  });

  it('every error of the OpenAI-compatible routes carries both the spec\'s detail and OpenAI\'s error object', async () => {
    const chat = (body: unknown, opts: { token?: string; raw?: string } = {}) =>
      gw.req('POST', '/v1/chat/completions', { ...(opts.raw === undefined ? { body } : { raw: opts.raw }), headers: { 'Content-Type': 'application/json', ...(opts.token ? { Authorization: `Bearer ${opts.token}` } : {}) } });
    const ok = { model: 'default-cua', messages: messages() };
    await gw.req('POST', '/v1/chat/completions', { body: ok, headers: { Authorization: `Bearer ${once}` } }); // takes the one token
    const cases: Array<[string, Promise<{ status: number; body: Body; headers: Headers }>, number, Body]> = [
      ['malformed JSON', chat(undefined, { token, raw: '{"model":' }), 400, { type: 'invalid_request_error', code: null }],
      ['a body past the limit', chat(undefined, { token, raw: JSON.stringify({ ...ok, pad: 'x'.repeat(BRAIN_BODY_MAX) }) }), 400, { type: 'invalid_request_error', code: null }],
      ['no credentials', chat(ok), 401, { code: 'invalid_api_key' }],
      ['an unknown model', chat({ ...ok, model: 'gpt-9' }, { token }), 404, { code: 'model_not_found', param: 'model' }],
      ['an unknown model by id', gw.req('GET', '/v1/models/gpt-9'), 404, { code: 'model_not_found' }],
      ['over the rate limit', chat(ok, { token: once }), 429, { type: 'requests', code: 'rate_limit_exceeded' }],
      ['an unreachable upstream', chat({ ...ok, model: 'mid-cua-8b' }, { token }), 502, { type: 'server_error', code: 'upstream_unreachable' }],
    ];
    for (const [what, pending, status, error] of cases) {
      const r = await pending;
      expect(r.status, what).to.equal(status);
      expect(r.body, what).to.have.all.keys('detail', 'error');
      expect(r.body.detail, what).to.be.a('string').and.not.equal('');
      expect(r.body.error, what).to.have.all.keys('message', 'type', 'code', 'param');
      expect(r.body.error.message, what).to.equal(r.body.detail);
      expect(r.body.error, what).to.deep.include(error);
    }
  });

  it('over the rate limit is OpenAI.RateLimitError (rate_limit_exceeded) with Retry-After', async () => {
    const slow = newToken();
    const keys = { [token]: { tenant_id: 'acme', rate_limit_per_minute: 0 }, [slow]: { tenant_id: 'slow', rate_limit_per_minute: 1 } };
    await gw.writeKeys(keys);
    await new Promise((r) => setTimeout(r, 250)); // the test gateway's keys cache is 200 ms
    const limited = new OpenAI({ apiKey: slow, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    await limited.chat.completions.create({ model: 'default-cua', messages: messages() });
    const e = await thrown(limited.chat.completions.create({ model: 'default-cua', messages: messages() }));
    expect(e).to.be.instanceOf(OpenAI.RateLimitError);
    const err = e as InstanceType<typeof OpenAI.RateLimitError>;
    expect(err.code).to.equal('rate_limit_exceeded');
    expect(err.headers.get('retry-after')).to.match(/^\d+$/);
  });

  describe("the caller's tools", () => {
    const computer: OpenAI.Chat.ChatCompletionTool = {
      type: 'function',
      function: {
        name: 'computer',
        description: 'one browser action',
        parameters: { type: 'object', properties: { action: { type: 'string' }, x: { type: 'integer' }, y: { type: 'integer' }, text: { type: 'string' } }, required: ['action'] },
      },
    };
    const search: OpenAI.Chat.ChatCompletionTool = {
      type: 'function',
      function: { name: 'search', parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'], additionalProperties: false } },
    };

    it("answers with the caller's function whose schema accepts the action (tools and tool_choice), streaming too", async () => {
      const c = await client.chat.completions.create({ model: 'default-cua', messages: messages(), tools: [search, computer] });
      const call = c.choices[0]!.message.tool_calls![0]!;
      if (call.type !== 'function') throw new Error('not a function call');
      expect(call.function.name).to.equal('computer');
      expect(JSON.parse(call.function.arguments)).to.deep.equal({ action: 'CLICK', x: 160, y: 167 });
      const stream = await client.chat.completions.create({ model: 'default-cua', messages: messages(), tools: [computer], tool_choice: { type: 'function', function: { name: 'computer' } }, stream: true });
      const names: string[] = [];
      for await (const chunk of stream) for (const t of chunk.choices[0]?.delta.tool_calls ?? []) if (t.function?.name) names.push(t.function.name);
      expect(names).to.deep.equal(['computer']);
    });

    it("reads earlier calls of the caller's function as the action history", async () => {
      const history: OpenAI.Chat.ChatCompletionMessageParam[] = [
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'computer', arguments: '{"action":"CLICK","x":160,"y":167}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'ok' },
      ];
      const c = await client.chat.completions.create({ model: 'default-cua', messages: [...history, ...messages()], tools: [computer] });
      expect(fake.requests[0]!.seen.actions).to.equal(1);
      const call = c.choices[0]!.message.tool_calls![0]!;
      if (call.type !== 'function') throw new Error('not a function call');
      expect(JSON.parse(call.function.arguments)).to.deep.include({ action: 'DONE', success: true });
    });

    it('refuses tools that cannot carry an action with 400 invalid_request_error naming the supported shapes, before asking the brain', async () => {
      const cases: Array<[Partial<OpenAI.Chat.ChatCompletionCreateParamsNonStreaming>, RegExp]> = [
        [{ tools: [search] }, /no offered function \(search\) accepts the service's action objects/],
        [{ tools: [computer, search], tool_choice: { type: 'function', function: { name: 'search' } } }, /no offered function \(search\)/],
        [{ tools: [computer], tool_choice: 'none' }, /tool_choice: 'none' is not supported/],
        [{ tools: [computer], tool_choice: { type: 'function', function: { name: 'nope' } } }, /names 'nope', which is not among tools/],
        [{ tools: [{ type: 'custom', custom: { name: 'free' } } as unknown as OpenAI.Chat.ChatCompletionTool] }, /tools\[0\]: only function tools are supported/],
        [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { action: { type: 'string', pattern: '^(a+)+$' } } } } }] }, /pattern and patternProperties are not supported/],
        [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'nonsense' } } }] }, /not a schema this service can check/],
      ];
      for (const [extra, message] of cases) {
        const e = await thrown(client.chat.completions.create({ model: 'default-cua', messages: messages(), ...extra }));
        expect(e, JSON.stringify(extra).slice(0, 120)).to.be.instanceOf(OpenAI.BadRequestError);
        const err = e as InstanceType<typeof OpenAI.BadRequestError>;
        expect(err.type).to.equal('invalid_request_error');
        expect(err.message).to.match(message);
        expect(err.message).to.include('supported is a list of {type: "function"');
      }
      expect(fake.requests).to.have.length(0);
    });

    it("refuses with 400 an action the caller's schema does not accept, naming the schema's objection", async () => {
      const doneOnly: OpenAI.Chat.ChatCompletionTool = { type: 'function', function: { name: 'finish', parameters: { type: 'object', properties: { action: { const: 'DONE' }, success: { type: 'boolean' } }, required: ['action'] } } };
      const e = await thrown(client.chat.completions.create({ model: 'default-cua', messages: messages(), tools: [doneOnly] }));
      expect(e).to.be.instanceOf(OpenAI.BadRequestError);
      expect((e as Error).message).to.match(/the brain answered \{"action":"CLICK","x":160,"y":167\}, which no offered function accepts \(finish: \/action must be equal to constant\)/);
    });
  });

  describe('service routes keep {detail}', () => {
    it('a service route answers {detail}, and does not take the tenant token as Bearer', async () => {
      const bearer = { Authorization: `Bearer ${token}` };
      const cua = await gw.req('POST', '/v1/cua', { headers: bearer, body: { screenshot: shot, task: 'x' } });
      expect(cua.status).to.equal(401);
      expect(cua.body).to.deep.equal({ detail: 'missing X-Service-Token header' });
      const run = await gw.req('GET', '/v1/runs/nope', { token });
      expect(run.status).to.equal(404);
      expect(run.body).to.have.all.keys('detail');
      const cuaModel = await gw.req('POST', '/v1/cua', { token, body: { screenshot: shot, task: 'x', cua_model: 'large-cua-72b' } });
      expect(cuaModel.status).to.equal(404);
      expect(cuaModel.body).to.deep.equal({ detail: "the model 'large-cua-72b' is accepted but not served by this deployment (no backend is configured for it); GET /v1/models lists the accepted ids, with served: true on those served here" });
    });
  });
});
