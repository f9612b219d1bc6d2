import { expect } from 'chai';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { crc32, deflateSync } from 'node:zlib';
import sharp from 'sharp';
import { startGateway, newToken, type TestGateway } from '../support/gateway.ts';
import { deadUrl, startFakeModel, type FakeModel } from '../support/fake-model.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** A tiny PNG whose header declares width x height (a decompression bomb's shape). */
function pngDeclaring(width: number, height: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([len, body, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth; colour type 0 (grey)
  return Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk('IHDR', ihdr), chunk('IDAT', deflateSync(Buffer.alloc(64))), chunk('IEND', Buffer.alloc(0))]);
}

const png = async (width: number, height: number) => (await sharp({ create: { width, height, channels: 3, background: { r: 250, g: 250, b: 250 } } }).png().toBuffer()).toString('base64');

describe('brain routes: POST /v1/cua and POST /v1/chat/completions (fake model server)', function () {
  this.timeout(30_000);
  const token = newToken();
  const limited = newToken();
  const keyless = newToken();
  let fake: FakeModel;
  let dir: string;
  let file: string;
  let multi: TestGateway;
  let single: TestGateway;
  let shot: string;
  let bomb: string;

  before(async () => {
    fake = await startFakeModel();
    shot = await png(800, 500);
    bomb = pngDeclaring(8000, 8000).toString('base64');
    dir = await mkdtemp(path.join(tmpdir(), 'runplane-brain-routes-'));
    file = path.join(dir, 'brains.json');
    await mkdir(path.join(dir, 'secrets'));
    await writeFile(path.join(dir, 'secrets', 'acme_key'), 'sk-acme\n');
    await writeFile(
      file,
      JSON.stringify({
        brains: {
          'default-cua': { protocol: 'openai-chat', base_url: fake.url, model: 'fake-default', price_per_mtok_in: 1 },
          'compact-cua': { protocol: 'compact-cua', base_url: fake.url, model: 'fake-compact' },
          'mid-cua-8b': { protocol: 'openai-chat', base_url: await deadUrl(), model: 'nobody', max_retries: 1, backoff_ms: 10 },
          'hosted-api': { protocol: 'hosted-api', base_url: fake.url, model: 'fake-hosted' },
        },
      }),
    );
    const keys = {
      [token]: { tenant_id: 'acme', rate_limit_per_minute: 0, model_provider_secret_name: 'acme_key' },
      [limited]: { tenant_id: 'slow', rate_limit_per_minute: 2 },
      [keyless]: { tenant_id: 'nokey', rate_limit_per_minute: 0 },
    };
    const env = { SERVICE_BRAINS_PATH: file, SERVICE_SECRETS_DIR: path.join(dir, 'secrets') };
    multi = await startGateway({ env, keys });
    single = await startGateway({ env: { ...env, SERVICE_MODEL: 'compact-cua' }, keys });
  });
  after(async () => {
    await Promise.all([multi.close(), single.close()]);
    await fake.close();
  });
  beforeEach(() => {
    fake.requests.length = 0;
  });

  const cua = (gw: TestGateway, body: Body, t = token) => gw.req('POST', '/v1/cua', { token: t, body });

  describe('POST /v1/cua', () => {
    it('answers one mapped service action with usage and the brain id', async () => {
      const r = await cua(multi, { screenshot: shot, task: 'press the hit button' });
      expect(r.status, r.text).to.equal(200);
      expect(r.body).to.deep.include({ action: { type: 'CLICK', x: 160, y: 167 }, model: 'default-cua' });
      expect(r.body.usage).to.deep.equal({ tokens_in: 1000, tokens_out: 50, cost_usd: 0.001 });
      expect(fake.requests[0]!.seen.image).to.deep.equal({ width: 800, height: 500 });
    });

    it('passes action_history and maps a compact-cua click to screen_size', async () => {
      const r = await cua(multi, { screenshot: shot, task: 'press the hit button', cua_model: 'compact-cua', screen_size: { width: 1600, height: 1000 } });
      expect(r.status, r.text).to.equal(200);
      // the fake clicks a fifth across and a third down its 1428x896 input: (286, 299) -> scaled to 1600x1000
      expect(r.body.action).to.deep.equal({ type: 'CLICK', x: Math.round((286 * 1600) / 1428), y: Math.round((299 * 1000) / 896) });
      const again = await cua(multi, { screenshot: shot, task: 'press the hit button', cua_model: 'compact-cua', action_history: [r.body.action] });
      expect(again.body.action).to.deep.equal({ type: 'DONE', success: true });
      expect(fake.requests[1]!.seen.actions).to.equal(1);
    });

    it('carries X-RateLimit-* headers and refuses past the limit with 429 and Retry-After', async () => {
      const a = await cua(multi, { screenshot: shot, task: 'anything' }, limited);
      expect(a.status).to.equal(200);
      expect(a.headers.get('x-ratelimit-limit')).to.equal('2');
      expect(a.headers.get('x-ratelimit-remaining')).to.equal('1');
      expect(Number(a.headers.get('x-ratelimit-reset'))).to.be.greaterThan(Date.now() / 1000);
      expect((await cua(multi, { screenshot: shot, task: 'anything' }, limited)).status).to.equal(200);
      const c = await cua(multi, { screenshot: shot, task: 'anything' }, limited);
      expect(c.status).to.equal(429);
      expect(c.headers.get('retry-after')).to.match(/^\d+$/);
      expect(c.headers.get('x-ratelimit-remaining')).to.equal('0');
      // a tenant without a limiter gets no headers
      expect((await cua(multi, { screenshot: shot, task: 'anything' })).headers.get('x-ratelimit-limit')).to.equal(null);
    });

    it('refuses hostile input with {detail} and the right status before it takes a rate token (this tenant has none left)', async () => {
      expect((await multi.req('POST', '/v1/cua', { body: { screenshot: shot, task: 'x' } })).status).to.equal(401);
      const cases: Array<[Body, RegExp]> = [
        [{ task: 'x' }, /screenshot: is required/],
        [{ screenshot: shot }, /task: is required/],
        [{ screenshot: '!!!! not base64 at all !!!!', task: 'x' }, /screenshot: is not base64/],
        [{ screenshot: Buffer.from('just some text, not an image').toString('base64'), task: 'x' }, /screenshot: is not a PNG, JPEG or WebP image/],
        [{ screenshot: shot, task: 'x', action_history: [{ type: 'EXPLODE' }] }, /action_history\[0\]\.type: must be one of/],
        [{ screenshot: Buffer.from(shot, 'base64').subarray(0, 200).toString('base64'), task: 'x' }, /screenshot: the image data is truncated or corrupt/],
        [{ screenshot: bomb, task: 'x' }, /screenshot: 8000x8000 is larger than 40000000 pixels/],
        [{ screenshot: shot, task: 'x', cua_model: 'gpt-7' }, /cua_model: unknown brain 'gpt-7'/],
      ];
      for (const [body, detail] of cases) {
        const r = await cua(multi, body, limited);
        expect(r.status, JSON.stringify(body).slice(0, 80)).to.equal(400);
        expect(r.body.detail).to.match(detail);
      }
      expect(fake.requests).to.have.length(0);
    });

    it('answers 502 {detail} when the upstream is down, refuses, or answers without a usable action', async () => {
      const down = await cua(multi, { screenshot: shot, task: 'x', cua_model: 'mid-cua-8b' });
      expect(down.status).to.equal(502);
      expect(down.body.detail).to.match(/^brain 'mid-cua-8b': .*unreachable \(ECONNREFUSED\); gave up after 2 attempts$/);
      fake.failNext(1, 'malformed');
      const garbled = await cua(multi, { screenshot: shot, task: 'x' });
      expect(garbled.status).to.equal(502);
      expect(garbled.body.detail).to.match(/malformed model answer/);
    });

    it("hosted-api uses the tenant's key from its secret file; a tenant without one gets 502", async () => {
      const r = await cua(multi, { screenshot: shot, task: 'x', cua_model: 'hosted-api' });
      expect(r.status, r.text).to.equal(200);
      expect(fake.requests[0]!.headers.authorization).to.equal('Bearer sk-acme');
      const none = await cua(multi, { screenshot: shot, task: 'x', cua_model: 'hosted-api' }, keyless);
      expect(none.status).to.equal(502);
      expect(none.body.detail).to.match(/needs the tenant's model-provider key/);
      expect(multi.logs.join('\n')).to.not.include('sk-acme');
    });
  });

  describe('single-brain vs multi-backend selection', () => {
    it('multi-backend honours cua_model; single-brain (SERVICE_MODEL) ignores it', async () => {
      const m = await cua(multi, { screenshot: shot, task: 'x', cua_model: 'compact-cua' });
      expect(m.body.model).to.equal('compact-cua');
      const s = await cua(single, { screenshot: shot, task: 'x', cua_model: 'default-cua' });
      expect(s.body.model).to.equal('compact-cua');
      expect(fake.requests.map((q) => [q.body.model, q.seen.tool])).to.deep.equal([
        ['fake-compact', 'computer_use'],
        ['fake-compact', 'computer_use'],
      ]);
      // runs too: the run's brain is SERVICE_MODEL whatever the body says
      const run = await single.req('POST', '/v1/predict', { token, body: { plan: [{ intent: 'x', type: 'default-cua' }], cua_model: 'mid-cua-8b' } });
      expect((await single.req('GET', `/v1/runs/${run.body.run_id}`, { token })).body.cua_model).to.equal('compact-cua');
      expect((await single.req('GET', '/v1/models')).body.data.filter((d: Body) => d.served).map((d: Body) => d.id)).to.deep.equal(['compact-cua']);
    });
  });

  describe('POST /v1/chat/completions', () => {
    const messages = (extra: Body[] = []) => [
      { role: 'system', content: 'ignored by the gateway' },
      ...extra,
      { role: 'user', content: [{ type: 'text', text: 'press the hit button' }, { type: 'image_url', image_url: { url: `data:image/png;base64,${shot}` } }] },
    ];

    it('answers in the OpenAI response shape with the action as an act tool call', async () => {
      const r = await multi.req('POST', '/v1/chat/completions', { token, body: { model: 'default-cua', messages: messages() } });
      expect(r.status, r.text).to.equal(200);
      expect(r.body).to.include({ object: 'chat.completion', model: 'default-cua' });
      expect(r.body.id).to.match(/^chatcmpl-/);
      const choice = r.body.choices[0];
      expect(choice).to.include({ index: 0, finish_reason: 'tool_calls' });
      expect(choice.message.role).to.equal('assistant');
      expect(choice.message.tool_calls[0]).to.deep.include({ type: 'function' });
      expect(choice.message.tool_calls[0].function.name).to.equal('act');
      expect(JSON.parse(choice.message.tool_calls[0].function.arguments)).to.deep.equal({ action: 'CLICK', x: 160, y: 167 });
      expect(r.body.usage).to.deep.equal({ prompt_tokens: 1000, completion_tokens: 50, total_tokens: 1050 });
    });

    it('reads earlier act tool calls as the action history (a caller-run loop)', async () => {
      const prev = { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'act', arguments: '{"action":"CLICK","x":160,"y":167}' } }] };
      const r = await multi.req('POST', '/production/sync/v1/chat/completions', { token, body: { messages: messages([{ role: 'user', content: 'earlier turn' }, prev, { role: 'tool', tool_call_id: 'call_1', content: 'ok' }]) } });
      expect(r.status, r.text).to.equal(200);
      expect(fake.requests[0]!.seen.actions).to.equal(1);
      expect(JSON.parse(r.body.choices[0].message.tool_calls[0].function.arguments)).to.deep.include({ action: 'DONE', success: true });
    });

    it('streams chat.completion.chunk events ending with data: [DONE] when stream is true', async () => {
      const r = await multi.req('POST', '/v1/chat/completions', { token, body: { messages: messages(), stream: true } });
      expect(r.status).to.equal(200);
      expect(r.headers.get('content-type')).to.match(/^text\/event-stream/);
      const events = r.text.split('\n\n').filter(Boolean).map((e) => e.replace(/^data: /, ''));
      expect(events.at(-1)).to.equal('[DONE]');
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
      expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0].id)).to.equal(true);
      expect(chunks[0].choices[0].delta.role).to.equal('assistant');
      const call = chunks[1].choices[0].delta.tool_calls[0];
      expect(call).to.include({ index: 0, type: 'function' });
      expect(JSON.parse(call.function.arguments)).to.deep.equal({ action: 'CLICK', x: 160, y: 167 });
      expect(chunks.at(-1).choices[0].finish_reason).to.equal('tool_calls');
    });

    it('refuses a body without a screenshot or task with 400, and a down upstream with 502 (OpenAI error shape)', async () => {
      const noImage = await multi.req('POST', '/v1/chat/completions', { token, body: { messages: [{ role: 'user', content: 'hello' }] } });
      expect(noImage.status).to.equal(400);
      expect(noImage.body.error).to.deep.include({ type: 'invalid_request_error', code: null, param: 'messages' });
      expect(noImage.body.error.message).to.match(/needs an image_url part/);
      const remote = await multi.req('POST', '/v1/chat/completions', { token, body: { messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }, { type: 'image_url', image_url: { url: 'http://169.254.169.254/latest' } }] }] } });
      expect(remote.status).to.equal(400);
      expect(remote.body.error.message).to.match(/data:image/);
      expect((await multi.req('POST', '/v1/chat/completions', { token, body: { messages: 'hi' } })).status).to.equal(400);
      const down = await multi.req('POST', '/v1/chat/completions', { token, body: { model: 'mid-cua-8b', messages: messages() } });
      expect(down.status).to.equal(502);
      expect(down.body.error).to.deep.include({ type: 'server_error', code: 'upstream_unreachable' });
      expect(down.body.error.message).to.match(/unreachable/);
    });
  });
});
