import { expect } from 'chai';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { LocalAgentPlanes } from '../../gateway/runner/agent-planes.ts';
import type { RunRecord } from '../../gateway/runs/records.ts';
import type { Action, Backend, Brain } from '../../gateway/plugins/contract.ts';
import { makeBrain, readBrainsConfig } from '../../plugins/brains/index.ts';
import { REPO_ROOT } from '../../shared/build.mjs';
import sharp from 'sharp';
import { displayFor, toScreen, xdoKey } from '../../plugins/brains/cua-common.ts';
import { mapComputerAction } from '../../plugins/brains/anthropic-computer.ts';
import { mapOpenAiAction } from '../../plugins/brains/openai-computer.ts';
import { MARKER, startCuaSite, type CuaSite } from '../fixtures/cua/site.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../fixtures/cua/anthropic.ts';
import { startFakeOpenAi, type FakeOpenAi } from '../fixtures/cua/openai.ts';
import { anthropicExtras, anthropicMarker, openAiMarker } from '../fixtures/cua/scripts.ts';
import { until } from '../support/gateway.ts';

describe('computer-use protocols: the display each vendor is shown and coordinates mapped back', () => {
  it('scales the screen as each vendor recommends', () => {
    expect(displayFor({ width: 1280, height: 720 }, 'anthropic')).to.deep.equal({ width: 1280, height: 720 });
    expect(displayFor({ width: 1024, height: 768 }, 'anthropic')).to.deep.equal({ width: 1024, height: 768 });
    // over 1.15 MP: scaled to it, aspect kept
    expect(displayFor({ width: 1920, height: 1080 }, 'anthropic')).to.deep.equal({ width: 1429, height: 804 });
    // a long edge over 1568 (a narrow, tall screen): the edge rules
    expect(displayFor({ width: 2000, height: 400 }, 'anthropic')).to.deep.equal({ width: 1568, height: 313 });
    expect(displayFor({ width: 1280, height: 720 }, 'openai')).to.deep.equal({ width: 1280, height: 720 });
    expect(displayFor({ width: 1920, height: 1080 }, 'openai')).to.deep.equal({ width: 1365, height: 768 });
  });

  it('maps every display pixel into the screen pixels it covers', () => {
    for (const [screen, display] of [
      [{ width: 1920, height: 1080 }, { width: 1429, height: 804 }],
      [{ width: 1920, height: 1080 }, { width: 1365, height: 768 }],
      [{ width: 1024, height: 768 }, { width: 1024, height: 768 }],
    ] as const) {
      const sx = screen.width / display.width;
      for (let x = 0; x < display.width; x++) {
        const p = toScreen({ x, y: 0 }, display, screen);
        expect(p.x, `${x} of ${display.width}`).to.be.at.least(Math.floor(x * sx)).and.below(Math.ceil((x + 1) * sx));
      }
      expect(toScreen({ x: display.width - 1, y: display.height - 1 }, display, screen)).to.deep.equal({ x: screen.width - 1, y: screen.height - 1 });
    }
  });

  it("maps each of Claude's computer actions to a plane action or an answer of its own", () => {
    const c = { display: { width: 1429, height: 804 }, screen: { width: 1920, height: 1080 }, cursor: { x: 10, y: 10 }, down: undefined as { x: number; y: number } | undefined };
    expect(mapComputerAction({ action: 'left_click', coordinate: [100, 50] }, c)).to.deep.equal({ action: { type: 'CLICK', x: 135, y: 67 } });
    expect(mapComputerAction({ action: 'cursor_position' }, c)).to.deep.equal({ answer: 'text', text: 'X=100,Y=50' });
    expect(mapComputerAction({ action: 'mouse_move', coordinate: [200, 100] }, c)).to.deep.equal({ answer: 'screenshot' });
    expect(mapComputerAction({ action: 'left_mouse_down' }, c)).to.deep.equal({ answer: 'screenshot' });
    mapComputerAction({ action: 'mouse_move', coordinate: [300, 100] }, c);
    expect(mapComputerAction({ action: 'left_mouse_up' }, c)).to.deep.equal({ action: { type: 'DRAG', x: 269, y: 135, to_x: 403, to_y: 135 } });
    expect(mapComputerAction({ action: 'left_click_drag', start_coordinate: [0, 0], coordinate: [1428, 803] }, c)).to.deep.equal({ action: { type: 'DRAG', x: 0, y: 0, to_x: 1919, to_y: 1079 } });
    expect(mapComputerAction({ action: 'double_click' }, c)).to.deep.include({ action: { type: 'DOUBLE_CLICK', x: 1919, y: 1079 } });
    expect(mapComputerAction({ action: 'right_click', coordinate: [0, 0] }, c)).to.deep.equal({ action: { type: 'RIGHT_CLICK', x: 0, y: 0 } });
    expect(mapComputerAction({ action: 'scroll', coordinate: [0, 0], scroll_direction: 'down', scroll_amount: 5 }, c)).to.deep.equal({ action: { type: 'SCROLL', direction: 'down', amount: 5, x: 0, y: 0 } });
    expect(mapComputerAction({ action: 'type', text: 'hello' }, c)).to.deep.equal({ action: { type: 'TYPE', text: 'hello' } });
    expect(mapComputerAction({ action: 'key', text: 'ctrl+a' }, c)).to.deep.equal({ action: { type: 'KEY_PRESS', keys: 'ctrl+a' } });
    expect(mapComputerAction({ action: 'wait', duration: 2 }, c)).to.deep.equal({ action: { type: 'WAIT', seconds: 2 } });
    expect(mapComputerAction({ action: 'screenshot' }, c)).to.deep.equal({ answer: 'screenshot' });
    expect(mapComputerAction({ action: 'triple_click', coordinate: [100, 50] }, c)).to.deep.equal({ action: { type: 'TRIPLE_CLICK', x: 135, y: 67 } });
    expect(mapComputerAction({ action: 'middle_click', coordinate: [0, 0] }, c)).to.deep.equal({ action: { type: 'MIDDLE_CLICK', x: 0, y: 0 } });
    expect(mapComputerAction({ action: 'hold_key', text: 'shift', duration: 0.5 }, c)).to.deep.equal({ action: { type: 'HOLD_KEY', keys: 'shift', seconds: 0.5 } });
    // what the planes cannot do, or a point off the display, is told to the model as an error it can read
    for (const bad of [{ action: 'hold_key', text: 'shift' }, { action: 'hold_key', text: 'shift', duration: 60 }, { action: 'hold_key', duration: 1 }, { action: 'zoom' }, { action: 'left_mouse_up' }, { action: 'left_click', coordinate: [1429, 0] }, { action: 'left_click', coordinate: [5, 5], text: 'shift' }, { action: 'teleport' }]) {
      expect(mapComputerAction(bad, c), JSON.stringify(bad)).to.have.property('error').that.is.a('string');
    }
  });

  it("maps each of OpenAI's computer_call actions", () => {
    const d = { width: 1365, height: 768 };
    const s = { width: 1920, height: 1080 };
    expect(mapOpenAiAction({ type: 'click', button: 'left', x: 100, y: 50 }, d, s)).to.deep.equal({ action: { type: 'CLICK', x: 141, y: 71 } });
    expect(mapOpenAiAction({ type: 'click', button: 'right', x: 0, y: 0 }, d, s)).to.deep.equal({ action: { type: 'RIGHT_CLICK', x: 0, y: 0 } });
    expect(mapOpenAiAction({ type: 'click', button: 'back', x: 0, y: 0 }, d, s)).to.deep.equal({ action: { type: 'KEY_PRESS', keys: 'alt+Left' } });
    expect(mapOpenAiAction({ type: 'click', button: 'wheel', x: 100, y: 50 }, d, s)).to.deep.equal({ action: { type: 'MIDDLE_CLICK', x: 141, y: 71 } });
    expect(mapOpenAiAction({ type: 'double_click', x: 1364, y: 767 }, d, s)).to.deep.equal({ action: { type: 'DOUBLE_CLICK', x: 1919, y: 1079 } });
    expect(mapOpenAiAction({ type: 'drag', path: [{ x: 0, y: 0 }, { x: 50, y: 50 }, { x: 100, y: 0 }] }, d, s)).to.deep.equal({ action: { type: 'DRAG', x: 0, y: 0, to_x: 141, to_y: 0 } });
    expect(mapOpenAiAction({ type: 'keypress', keys: ['CTRL', 'A'] }, d, s)).to.deep.equal({ action: { type: 'KEY_PRESS', keys: 'ctrl+a' } });
    expect(mapOpenAiAction({ type: 'keypress', keys: ['ENTER'] }, d, s)).to.deep.equal({ action: { type: 'KEY_PRESS', keys: 'Return' } });
    expect(mapOpenAiAction({ type: 'scroll', x: 10, y: 10, scroll_x: 0, scroll_y: 300 }, d, s)).to.deep.equal({ action: { type: 'SCROLL', direction: 'down', amount: 3, x: 14, y: 14 } });
    expect(mapOpenAiAction({ type: 'scroll', x: 10, y: 10, scroll_x: -200, scroll_y: 0 }, d, s)).to.deep.include({ action: { type: 'SCROLL', direction: 'left', amount: 2, x: 14, y: 14 } });
    expect(mapOpenAiAction({ type: 'type', text: 'hi' }, d, s)).to.deep.equal({ action: { type: 'TYPE', text: 'hi' } });
    expect(mapOpenAiAction({ type: 'wait' }, d, s)).to.deep.equal({ action: { type: 'WAIT', seconds: 1 } });
    expect(mapOpenAiAction({ type: 'move', x: 3, y: 3 }, d, s)).to.deep.equal({ answer: 'screenshot' });
    expect(mapOpenAiAction({ type: 'screenshot' }, d, s)).to.deep.equal({ answer: 'screenshot' });
    expect(['ESC', 'Tab', 'ArrowUp', 'F5', 'space'].map(xdoKey)).to.deep.equal(['Escape', 'Tab', 'Up', 'F5', 'space']);
    for (const bad of [{ type: 'click', x: 1365, y: 0 }, { type: 'drag', path: [{ x: 1, y: 1 }] }, { type: 'keypress', keys: [] }, { type: 'teleport' }]) {
      expect(() => mapOpenAiAction(bad, d, s), JSON.stringify(bad)).to.throw(/malformed openai-computer answer/);
    }
  });
});

describe('computer-use protocols: configuration, tool version, calls without a step', () => {
  const png = async (w: number, h: number) => ({ image: await sharp({ create: { width: w, height: h, channels: 3, background: { r: 250, g: 250, b: 250 } } }).png().toBuffer(), width: w, height: h, format: 'png' as const, scroll_y: 0, captured_at_ms: Date.now() });
  const env = { secretsDir: '/nonexistent' };
  const tenant = { providerKey: async () => 'sk-unit' };

  it('config/brains.example.json is valid and builds each of its backends', async () => {
    const { config } = await readBrainsConfig({ SERVICE_BRAINS_PATH: path.join(REPO_ROOT, 'config/brains.example.json') });
    expect(config!.brains['claude-cua']).to.include({ protocol: 'anthropic-computer' });
    expect(config!.brains['openai-cua']).to.include({ protocol: 'openai-computer' });
    for (const [id, b] of Object.entries(config!.brains)) expect(makeBrain(id, b, env).id).to.equal(id);
    const bad = path.join(await mkdtemp(path.join(tmpdir(), 'cua-bad-')), 'brains.json');
    await writeFile(bad, JSON.stringify({ brains: { c: { protocol: 'anthropic-computer', base_url: 'https://api.anthropic.com', model: 'm', tool_version: 'computer_20991231' } } }));
    await readBrainsConfig({ SERVICE_BRAINS_PATH: bad }).then(
      () => expect.fail('an unknown tool_version is refused'),
      (err: Error) => expect(err.message).to.match(/tool_version/),
    );
  });

  it('tool_version computer_20251124 is sent with its beta header', async () => {
    const fake = await startFakeAnthropic(() => ({ text: 'Nothing to do.' }));
    try {
      const brain = makeBrain('c', { protocol: 'anthropic-computer', base_url: fake.url, model: 'claude-opus-next', tool_version: 'computer_20251124' }, env);
      const out = await brain.think([{ screenshot: await png(1280, 720) }], 'look', [], { width: 1280, height: 720 }, undefined, tenant);
      expect(out.action).to.deep.equal({ type: 'DONE', success: true });
      expect(out.reasoning).to.equal('Nothing to do.');
      expect(fake.calls[0]!.headers['anthropic-beta']).to.equal('computer-use-2025-11-24');
      expect(fake.calls[0]!.body.tools[0]).to.include({ type: 'computer_20251124', name: 'computer' });
    } finally {
      await fake.close();
    }
  });

  it('without a step signal each call starts a conversation, with the actions so far in its text', async () => {
    const fake = await startFakeOpenAi(() => ({ actions: [{ type: 'click', button: 'left', x: 5, y: 5 }] }));
    try {
      const brain = makeBrain('o', { protocol: 'openai-computer', base_url: fake.url, model: 'computer-use-preview' }, env);
      const shot = await png(800, 600);
      const a = await brain.think([{ screenshot: shot }], 'poke', [], { width: 800, height: 600 }, undefined, tenant);
      await brain.think([{ screenshot: shot }], 'poke', [a.action], { width: 800, height: 600 }, undefined, tenant);
      expect(fake.calls.map((c) => c.body.previous_response_id)).to.deep.equal([undefined, undefined]);
      expect(fake.calls[1]!.body.input[0].content[0].text).to.match(/Actions so far.*\n1\. CLICK \{"x":5,"y":5\}/s);
    } finally {
      await fake.close();
    }
  });

  it('anthropic-computer answers a question about the screen (extraction, verify) without the tool', async () => {
    const fake = await startFakeAnthropic((c) => ({ text: `{"holds": true, "reason": "a ${c.image?.width}x${c.image?.height} screen"}`, usage: { input_tokens: 2000, output_tokens: 20 } }));
    try {
      const brain = makeBrain('c', { protocol: 'anthropic-computer', base_url: fake.url, model: 'm', price_per_mtok_in: 3, price_per_mtok_out: 15 }, env);
      const answer = await brain.ask!([{ screenshot: await png(1920, 1080) }], 'Does the page say Thanks?', undefined, tenant);
      expect(answer.text).to.equal('{"holds": true, "reason": "a 1429x804 screen"}');
      expect(answer.usage).to.deep.equal({ tokens_in: 2000, tokens_out: 20, cost_usd: (2000 * 3 + 20 * 15) / 1e6 });
      expect(fake.calls[0]!.body.tools).to.equal(undefined);
      expect(fake.calls[0]!.headers['anthropic-beta']).to.equal(undefined);
      expect(fake.calls[0]!.body.messages[0].content[1]).to.deep.equal({ type: 'text', text: 'Does the page say Thanks?' });
    } finally {
      await fake.close();
    }
  });

  it("a cancelled step's call ends with the step's reason, not a provider error", async () => {
    const fake = await startFakeAnthropic(() => ({ text: 'late' }));
    try {
      const brain = makeBrain('c', { protocol: 'anthropic-computer', base_url: fake.url, model: 'm' }, env);
      const step = new AbortController();
      const reason = new Error('step cancelled');
      step.abort(reason);
      const err = await brain.think([{ screenshot: await png(640, 480) }], 'x', [], { width: 640, height: 480 }, step.signal, tenant).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.equal(reason);
    } finally {
      await fake.close();
    }
  });

  it("a tenant without a key gets no_key naming the backend; nothing is sent", async () => {
    const fake = await startFakeAnthropic();
    try {
      const brain = makeBrain('c', { protocol: 'anthropic-computer', base_url: fake.url, model: 'm' }, env);
      const err = (await brain.think([{ screenshot: await png(640, 480) }], 'x', [], { width: 640, height: 480 }, undefined, { providerKey: async () => undefined }).catch((e: unknown) => e)) as { code?: string; message?: string };
      expect(err.code).to.equal('no_key');
      expect(err.message).to.match(/^brain c \(anthropic-computer at 127\.0\.0\.1:\d+\) needs the tenant's model-provider key/);
      expect(fake.calls).to.have.length(0);
    } finally {
      await fake.close();
    }
  });
});

describe("computer-use protocols: a click at the model's (x, y) lands on the page pixel it meant (two viewport sizes, both planes)", function () {
  this.timeout(240_000);
  let site: CuaSite;
  let claude: FakeAnthropic;
  let gpt: FakeOpenAi;
  let planes: LocalAgentPlanes;
  let brains: Brain[];

  before(async () => {
    [site, claude, gpt] = await Promise.all([startCuaSite(), startFakeAnthropic(anthropicMarker), startFakeOpenAi(openAiMarker)]);
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-cua-pixels-'));
    const env = { secretsDir: path.join(dir, 'secrets') };
    brains = [makeBrain('claude-cua', { protocol: 'anthropic-computer', base_url: claude.url, model: 'claude-sonnet-4-5' }, env), makeBrain('openai-cua', { protocol: 'openai-computer', base_url: gpt.url, model: 'computer-use-preview' }, env)];
    planes = new LocalAgentPlanes(path.join(dir, 'planes'), pino({ level: 'silent' }), { allowPrivateNetworks: true });
  });
  after(async () => {
    await planes?.close();
    await Promise.all([site?.close(), claude?.close(), gpt?.close()]);
  });

  for (const backend of ['dom_plane', 'computer_plane'] as Backend[]) {
    for (const [w, h] of [
      [1024, 768],
      [1920, 1080],
    ] as const) {
      it(`${backend} at ${w}x${h}`, async () => {
        const run = { run_id: randomUUID(), tenant_id: 'pixels', profile_id: null, runtime: { compute_backend: backend, viewport: [w, h] } } as unknown as RunRecord;
        const lease = await planes.open(run);
        try {
          await lease.plane.act({ type: 'NAVIGATE', url: `${site.url}/target` });
          for (const brain of brains) {
            site.clicks.length = 0;
            claude.calls.length = 0;
            gpt.calls.length = 0;
            // one step: its own signal carries the conversation across turns
            const step = new AbortController();
            const history: Action[] = [];
            for (let turn = 0; turn < 3; turn++) {
              const shot = await lease.plane.screenshot();
              expect([shot.width, shot.height]).to.deep.equal([w, h]);
              const out = await brain.think([{ screenshot: shot }], 'click the magenta marker', history, { width: shot.width, height: shot.height }, step.signal, { providerKey: async () => 'sk-pixels' });
              if (out.action.type === 'DONE') break;
              await lease.plane.act(out.action);
              history.push(out.action);
            }
            expect(history.map((a) => a.type), brain.id).to.deep.equal(['CLICK']);
            expect(await until(async () => site.clicks.length > 0, 10_000), `${brain.id}: the page saw a click`).to.equal(true);
            const display = brain.id === 'claude-cua' ? claude.calls[0]!.display : gpt.calls[0]!.display;
            expect(display).to.deep.equal(displayFor({ width: w, height: h }, brain.id === 'claude-cua' ? 'anthropic' : 'openai'));
            const image = brain.id === 'claude-cua' ? claude.calls[0]!.image : gpt.calls[0]!.image;
            expect([image?.width, image?.height]).to.deep.equal([display.width, display.height]);
            // one display pixel covers up to ceil(screen/display) page pixels: the click is within that of the marker's centre, on the marker
            const tol = Math.ceil(w / display.width);
            const click = site.clicks[0]!;
            const centre = { x: MARKER.left + MARKER.size / 2, y: MARKER.top + MARKER.size / 2 };
            expect(click.target, `${brain.id} at ${JSON.stringify(click)}`).to.equal('marker');
            expect(Math.abs(click.x - centre.x), `${brain.id} x ${click.x}`).to.be.at.most(tol);
            expect(Math.abs(click.y - centre.y), `${brain.id} y ${click.y}`).to.be.at.most(tol);
          }
        } finally {
          await lease.close();
        }
      });
    }
    it(`${backend}: Claude's triple_click, middle_click and hold_key reach the page as a person's would`, async () => {
      const extras = await startFakeAnthropic(anthropicExtras);
      const run = { run_id: randomUUID(), tenant_id: 'pixels', profile_id: null, runtime: { compute_backend: backend, viewport: [1024, 768] } } as unknown as RunRecord;
      const lease = await planes.open(run);
      try {
        const dir = await mkdtemp(path.join(tmpdir(), 'runplane-cua-extras-'));
        const brain = makeBrain('claude-extras', { protocol: 'anthropic-computer', base_url: extras.url, model: 'claude-sonnet-4-5' }, { secretsDir: path.join(dir, 'secrets') });
        await lease.plane.act({ type: 'NAVIGATE', url: `${site.url}/target` });
        site.clicks.length = 0;
        site.keys.length = 0;
        const step = new AbortController();
        const history: Action[] = [];
        for (let turn = 0; turn < 5; turn++) {
          const shot = await lease.plane.screenshot();
          const out = await brain.think([{ screenshot: shot }], 'work the magenta marker', history, { width: shot.width, height: shot.height }, step.signal, { providerKey: async () => 'sk-extras' });
          if (out.action.type === 'DONE') break;
          await lease.plane.act(out.action);
          history.push(out.action);
        }
        expect(history.map((a) => a.type)).to.deep.equal(['TRIPLE_CLICK', 'MIDDLE_CLICK', 'HOLD_KEY']);
        expect(await until(async () => site.clicks.length >= 4 && site.keys.some((k) => k.type === 'keyup'), 10_000), JSON.stringify([site.clicks, site.keys])).to.equal(true);
        // three presses counted 1, 2, 3 (the browser's triple click), then one with the middle button, all on the marker
        expect(site.clicks.map((c) => [c.target, c.detail, c.button])).to.deep.equal([
          ['marker', 1, 0],
          ['marker', 2, 0],
          ['marker', 3, 0],
          ['marker', 1, 1],
        ]);
        const down = site.keys.find((k) => k.type === 'keydown' && k.key === 'Shift');
        const up = site.keys.findLast((k) => k.type === 'keyup' && k.key === 'Shift');
        expect(down && up, JSON.stringify(site.keys)).to.not.equal(undefined);
        expect(up!.t - down!.t, 'shift held about 0.4 s').to.be.within(300, 2000);
      } finally {
        await lease.close();
        await extras.close();
      }
    });
  }
});
