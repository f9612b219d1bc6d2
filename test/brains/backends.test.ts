import { expect } from 'chai';
import { mkdtemp, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { isBrainError, type Action, type Frame } from '../../gateway/plugins/contract.ts';
import { ChatBrain } from '../../plugins/brains/chat-brain.ts';
import { CompactCuaBrain, DEFAULT_INPUT, SEARCH_URL, mapCompactAction, parseWH } from '../../plugins/brains/compact-cua.ts';
import { makeBrain, readBrainsConfig } from '../../plugins/brains/index.ts';
import { deadUrl, startFakeModel, type FakeModel } from '../support/fake-model.ts';

async function frame(width: number, height: number): Promise<Frame> {
  const image = await sharp({ create: { width, height, channels: 3, background: { r: 240, g: 240, b: 240 } } }).png().toBuffer();
  return { screenshot: { image, format: 'png', width, height, scroll_y: 0, captured_at_ms: Date.now() } };
}

async function rejection(p: Promise<unknown>): Promise<Error & { code?: string; usage?: unknown }> {
  try {
    await p;
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('expected a rejection');
}

describe('brain backends (plugins/brains) against a fake model server', function () {
  this.timeout(20_000);
  let fake: FakeModel;
  let dir: string;
  const env = () => ({ secretsDir: path.join(dir, 'secrets'), promptsDir: path.join(dir, 'prompts') });
  before(async () => {
    fake = await startFakeModel();
    dir = await mkdtemp(path.join(tmpdir(), 'runplane-brains-'));
    await mkdir(path.join(dir, 'secrets'));
    await mkdir(path.join(dir, 'prompts'));
  });
  after(() => fake.close());
  beforeEach(() => {
    fake.requests.length = 0;
    fake.script = undefined;
    fake.usage = { prompt_tokens: 1000, completion_tokens: 50 };
  });

  describe('compact-cua mapping table, row by row (viewport 1280x720, input 1428x896)', () => {
    const input = DEFAULT_INPUT;
    const vp = { width: 1280, height: 720 };
    const map = (args: Record<string, unknown>) => mapCompactAction(args, input, vp);

    it('left_click -> CLICK with coordinates scaled from the input resolution to the viewport', () => {
      expect(map({ action: 'left_click', coordinate: [714, 448] }).action).to.deep.equal({ type: 'CLICK', x: 640, y: 360 });
      expect(map({ action: 'left_click', coordinate: [0, 0] }).action).to.deep.equal({ type: 'CLICK', x: 0, y: 0 });
      expect(map({ action: 'left_click', coordinate: [1427, 895] }).action).to.deep.equal({ type: 'CLICK', x: 1279, y: 719 });
    });
    it('type -> TYPE', () => expect(map({ action: 'type', text: 'hello' }).action).to.deep.equal({ type: 'TYPE', text: 'hello' }));
    it('key -> KEY_PRESS with the key list joined by +', () => {
      expect(map({ action: 'key', keys: ['ctrl', 'a'] }).action).to.deep.equal({ type: 'KEY_PRESS', keys: 'ctrl+a' });
      expect(map({ action: 'key', keys: ['Return'] }).action).to.deep.equal({ type: 'KEY_PRESS', keys: 'Return' });
    });
    it('scroll -> SCROLL with direction, amount and an optional scaled coordinate', () => {
      expect(map({ action: 'scroll', scroll_direction: 'down', scroll_amount: 5 }).action).to.deep.equal({ type: 'SCROLL', direction: 'down', amount: 5 });
      expect(map({ action: 'scroll', scroll_direction: 'up', scroll_amount: 2, coordinate: [357, 224] }).action).to.deep.equal({ type: 'SCROLL', direction: 'up', amount: 2, x: 320, y: 180 });
    });
    it('wait -> WAIT with duration as seconds', () => expect(map({ action: 'wait', duration: 2.5 }).action).to.deep.equal({ type: 'WAIT', seconds: 2.5 }));
    it('visit_url -> TYPE(url), the URL auto-navigate path', () => expect(map({ action: 'visit_url', url: 'https://example.com/a' }).action).to.deep.equal({ type: 'TYPE', text: 'https://example.com/a' }));
    it('history_back -> KEY_PRESS alt+Left', () => expect(map({ action: 'history_back' }).action).to.deep.equal({ type: 'KEY_PRESS', keys: 'alt+Left' }));
    it('web_search -> TYPE(search URL)', () => expect(map({ action: 'web_search', query: 'flats in berlin' }).action).to.deep.equal({ type: 'TYPE', text: `${SEARCH_URL}flats%20in%20berlin` }));
    it('mouse_move -> WAIT 0.2 s (no-op)', () => expect(map({ action: 'mouse_move', coordinate: [10, 10] }).action).to.deep.equal({ type: 'WAIT', seconds: 0.2 }));
    it('pause_and_memorize_fact -> WAIT 0.2 s with the fact kept in the reasoning', () => {
      const r = map({ action: 'pause_and_memorize_fact', fact: 'the price is 120 EUR' });
      expect(r.action).to.deep.equal({ type: 'WAIT', seconds: 0.2 });
      expect(r.reasoning).to.include('the price is 120 EUR');
    });
    it('terminate -> DONE, success from status', () => {
      expect(map({ action: 'terminate', status: 'success' }).action).to.deep.equal({ type: 'DONE', success: true });
      expect(map({ action: 'terminate', status: 'failure' }).action).to.deep.equal({ type: 'DONE', success: false });
    });
    it('refuses unknown actions, missing parameters and coordinates outside the input as malformed', () => {
      for (const bad of [{ action: 'double_click', coordinate: [1, 1] }, { action: 'left_click' }, { action: 'left_click', coordinate: [1428, 10] }, { action: 'left_click', coordinate: [-1, 10] }, { action: 'key', keys: [] }, { action: 'scroll' }, {}]) {
        let err: unknown;
        try {
          map(bad);
        } catch (e) {
          err = e;
        }
        expect(isBrainError(err) && err.code, JSON.stringify(bad)).to.equal('malformed');
      }
    });
    it('parses WxH and refuses anything else', () => {
      expect(parseWH('1024x640', 'X')).to.deep.equal({ width: 1024, height: 640 });
      expect(parseWH(undefined, 'X')).to.equal(undefined);
      expect(() => parseWH('1024*640', 'SERVICE_COMPACT_INPUT_WH')).to.throw(/SERVICE_COMPACT_INPUT_WH must be WxH/);
    });
  });

  it('compact-cua resizes the screenshot to its input and scales the click back at a non-default viewport', async () => {
    const brain = new CompactCuaBrain('compact-cua', { protocol: 'compact-cua', base_url: fake.url, model: 'compact-1' }, env(), { width: 1000, height: 800 });
    // the fake clicks a fifth across and a third down the image it receives: (200, 267) in input space
    const out = await brain.think([await frame(800, 600)], 'press the hit button', [], { width: 800, height: 600 });
    expect(fake.requests[0]!.seen.image).to.deep.equal({ width: 1000, height: 800 });
    expect(fake.requests[0]!.body.tools[0].function.name).to.equal('computer_use');
    expect(out.action).to.deep.equal({ type: 'CLICK', x: 160, y: 200 });
    // history goes back to the model in its own coordinate space
    const prev: Action[] = [{ type: 'CLICK', x: 160, y: 200 }];
    const next = await brain.think([await frame(800, 600)], 'press the hit button', prev, { width: 800, height: 600 });
    expect(fake.requests[1]!.seen.text).to.include('CLICK {"x":200,"y":267}');
    expect(next.action).to.deep.equal({ type: 'DONE', success: true });
  });

  it('openai-chat reads the act tool call, or an action as JSON in the text, and prices the usage', async () => {
    const brain = new ChatBrain('default-cua', { protocol: 'openai-chat', base_url: fake.url, model: 'ui-tars', price_per_mtok_in: 2, price_per_mtok_out: 10 }, env());
    const out = await brain.think([await frame(640, 400)], 'press the hit button', [], { width: 640, height: 400 });
    expect(out.action).to.deep.equal({ type: 'CLICK', x: 128, y: 133 });
    expect(out.usage).to.deep.equal({ tokens_in: 1000, tokens_out: 50, cost_usd: (1000 * 2 + 50 * 10) / 1e6 });
    const req = fake.requests[0]!;
    expect(req.body.model).to.equal('ui-tars');
    expect(req.body.tools[0].function.name).to.equal('act');
    expect(req.seen.image).to.deep.equal({ width: 640, height: 400 });
    expect(req.headers.authorization).to.equal(undefined);
    fake.script = () => ({ text: 'I will scroll.\n```json\n{"action": "SCROLL", "direction": "down", "amount": 2}\n```' });
    expect((await brain.think([await frame(640, 400)], 'read more', [], { width: 640, height: 400 })).action).to.deep.equal({ type: 'SCROLL', direction: 'down', amount: 2 });
  });

  it('a malformed answer is a BrainError(malformed) carrying the usage, never a crash', async () => {
    const brain = new ChatBrain('default-cua', { protocol: 'openai-chat', base_url: fake.url, model: 'm', price_per_mtok_in: 1 }, env());
    const f = await frame(640, 400);
    fake.failNext(1, 'malformed');
    let err = await rejection(brain.think([f], 'x', [], { width: 640, height: 400 }));
    expect(isBrainError(err) && err.code).to.equal('malformed');
    expect(err.message).to.match(/unknown action "TELEPORT"/);
    expect(err.usage).to.deep.include({ tokens_in: 1000 });
    fake.script = () => ({ call: { action: 'CLICK', x: 9999, y: 5 } });
    err = await rejection(brain.think([f], 'x', [], { width: 640, height: 400 }));
    expect(err.message).to.match(/outside the 640x400 screen/);
    fake.script = () => ({ text: 'no idea' });
    err = await rejection(brain.think([f], 'x', [], { width: 640, height: 400 }));
    expect(err.message).to.match(/no tool call and no action/);
    fake.failNext(1, 'not-json');
    expect((await rejection(brain.think([f], 'x', [], { width: 640, height: 400 }))).code).to.equal('malformed');
  });

  it('retries 5xx with exponential backoff, then gives up as unreachable; a dead upstream likewise', async () => {
    const backend = { protocol: 'openai-chat' as const, base_url: fake.url, model: 'm', max_retries: 3, backoff_ms: 40 };
    const brain = new ChatBrain('default-cua', backend, env());
    const f = await frame(320, 200);
    fake.failNext(2, '5xx');
    const ok = await brain.think([f], 'anything', [], { width: 320, height: 200 });
    expect(ok.action.type).to.equal('DONE');
    expect(fake.requests).to.have.length(3);
    fake.requests.length = 0;
    fake.failNext(4, '5xx');
    const t0 = Date.now();
    const err = await rejection(brain.think([f], 'anything', [], { width: 320, height: 200 }));
    expect(err.code).to.equal('unreachable');
    expect(err.message).to.match(/HTTP 503; gave up after 4 attempts/);
    expect(fake.requests).to.have.length(4);
    expect(Date.now() - t0, 'backoff 40 + 80 + 160 ms').to.be.greaterThanOrEqual(280);
    const dead = new ChatBrain('default-cua', { ...backend, base_url: await deadUrl(), max_retries: 1 }, env());
    const down = await rejection(dead.think([f], 'anything', [], { width: 320, height: 200 }));
    expect(down.code).to.equal('unreachable');
    expect(down.message).to.match(/unreachable \(ECONNREFUSED\); gave up after 2 attempts/);
  });

  it('times out a call that hangs, and stops at once when cancelled', async () => {
    const brain = new ChatBrain('default-cua', { protocol: 'openai-chat', base_url: fake.url, model: 'm', timeout_ms: 200, max_retries: 0 }, env());
    const f = await frame(320, 200);
    fake.failNext(1, 'hang');
    const err = await rejection(brain.think([f], 'x', [], { width: 320, height: 200 }));
    expect(err.code).to.equal('unreachable');
    expect(err.message).to.match(/did not answer within 200 ms/);
    const slow = new ChatBrain('default-cua', { protocol: 'openai-chat', base_url: fake.url, model: 'm', timeout_ms: 10_000, max_retries: 0 }, env());
    fake.failNext(1, 'hang');
    const ac = new AbortController();
    const t0 = Date.now();
    setTimeout(() => ac.abort(new Error('cancelled by test')), 100);
    const cancelled = await rejection(slow.think([f], 'x', [], { width: 320, height: 200 }, ac.signal));
    expect(cancelled.message).to.equal('cancelled by test');
    expect(Date.now() - t0).to.be.lessThan(2000);
  });

  it("hosted-api sends the tenant's key and the tenant's prompt; no key is no_key; a 401 is refused", async () => {
    const brain = makeBrain('hosted-api', { protocol: 'hosted-api', base_url: fake.url, model: 'gpt-x' }, env());
    const f = await frame(320, 200);
    await writeFile(path.join(dir, 'prompts', 'acme.txt'), 'Never buy anything.\n');
    const out = await brain.think([f], 'anything', [], { width: 320, height: 200 }, undefined, { tenantId: 'acme', providerKey: async () => 'sk-tenant-key' });
    expect(out.action.type).to.equal('DONE');
    expect(fake.requests[0]!.headers.authorization).to.equal('Bearer sk-tenant-key');
    expect(fake.requests[0]!.body.messages[0].content).to.match(/Never buy anything\.$/);
    const none = await rejection(brain.think([f], 'anything', [], { width: 320, height: 200 }, undefined, { tenantId: 'acme', providerKey: async () => undefined }));
    expect(none.code).to.equal('no_key');
    fake.failNext(1, '401');
    const refused = await rejection(brain.think([f], 'anything', [], { width: 320, height: 200 }, undefined, { tenantId: 'acme', providerKey: async () => 'sk-wrong' }));
    expect(refused.code).to.equal('refused');
    expect(refused.message).to.not.include('sk-wrong');
    // a backend key comes from its api_key_secret file
    await writeFile(path.join(dir, 'secrets', 'vllm_key'), 'deploy-key\n');
    const keyed = makeBrain('mid-cua-8b', { protocol: 'openai-chat', base_url: fake.url, model: 'm', api_key_secret: 'vllm_key' }, env());
    await keyed.think([f], 'anything', [], { width: 320, height: 200 });
    expect(fake.requests.at(-1)!.headers.authorization).to.equal('Bearer deploy-key');
  });

  it('reads SERVICE_BRAINS_PATH: absent default is no brains, an explicit missing or invalid file refuses', async () => {
    const missing = path.join(dir, 'nope.json');
    await rejection(readBrainsConfig({ SERVICE_BRAINS_PATH: missing })).then((e) => expect(e.message).to.match(/cannot be read: ENOENT/));
    const bad = path.join(dir, 'bad.json');
    await writeFile(bad, JSON.stringify({ brains: { 'default-cua': { protocol: 'grpc', base_url: fake.url, model: 'm' } } }));
    await rejection(readBrainsConfig({ SERVICE_BRAINS_PATH: bad })).then((e) => expect(e.message).to.match(/brains\.default-cua\.protocol: must be one of/));
    const good = path.join(dir, 'good.json');
    await writeFile(good, JSON.stringify({ brains: { 'default-cua': { protocol: 'openai-chat', base_url: fake.url, model: 'm' } } }));
    expect(Object.keys((await readBrainsConfig({ SERVICE_BRAINS_PATH: good })).config!.brains)).to.deep.equal(['default-cua']);
  });
});
