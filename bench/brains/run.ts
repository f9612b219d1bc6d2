// bench/brains: the gateway's overhead of one brain turn (screenshot, resize,
// encode, request, parse, act) against the fake model server answering at
// once, per plane and per protocol, on a real agent with real Chromium.
// Phases: screenshot (plane), think (resize + base64 + JSON + HTTP round trip
// on loopback + parse), act (plane). p50/p99 over --turns turns.
// anthropic-computer and openai-computer go through their SDKs to local fakes of
// the vendors' wire formats (test/fixtures/cua, not looking at the images); their
// turns are steps of 15 (the default max_steps): one conversation per step, so
// Anthropic's request carries the step's screenshots so far and OpenAI's only the
// latest (previous_response_id).
// Usage: npm run bench:brains [-- --turns 60]
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { LocalAgentPlanes } from '../../gateway/runner/agent-planes.ts';
import type { RunRecord } from '../../gateway/runs/records.ts';
import type { Action, Backend, Brain } from '../../gateway/plugins/contract.ts';
import { makeBrain } from '../../plugins/brains/index.ts';
import { startSite } from '../../test/support/site.ts';
import { startFakeModel } from '../../test/support/fake-model.ts';
import { startFakeAnthropic } from '../../test/fixtures/cua/anthropic.ts';
import { startFakeOpenAi } from '../../test/fixtures/cua/openai.ts';
import { numArg, pct } from '../stats.ts';

const TURNS = numArg('turns', 60);

const STEP = 15;
// the middle of the screen, on a page where nothing changes, forever (as the chat fake's "stuck")
const [site, fake, claude, gpt] = await Promise.all([
  startSite(),
  startFakeModel(),
  startFakeAnthropic((c) => ({ tools: [{ action: 'left_click', coordinate: [Math.floor(c.display.width / 2), Math.floor(c.display.height / 2)] }] }), { see: false }),
  startFakeOpenAi((c) => ({ actions: [{ type: 'click', button: 'left', x: Math.floor(c.display.width / 2), y: Math.floor(c.display.height / 2) }] }), { see: false }),
]);
const dir = await mkdtemp(path.join(tmpdir(), 'runplane-bench-brains-'));
const env = { secretsDir: path.join(dir, 'secrets') };
const brains: Brain[] = [
  makeBrain('default-cua', { protocol: 'openai-chat', base_url: fake.url, model: 'fake' }, env),
  makeBrain('compact-cua', { protocol: 'compact-cua', base_url: fake.url, model: 'fake' }, env),
  makeBrain('anthropic-cu', { protocol: 'anthropic-computer', base_url: claude.url, model: 'fake', api_key_secret: 'bench_key' }, env),
  makeBrain('openai-cu', { protocol: 'openai-computer', base_url: gpt.url, model: 'fake', api_key_secret: 'bench_key' }, env),
];
const conversational = new Set(['anthropic-cu', 'openai-cu']);
await mkdir(env.secretsDir, { recursive: true });
await writeFile(path.join(env.secretsDir, 'bench_key'), 'sk-bench');
// loopback fixtures: the agents' egress guard lets private addresses through only when told
const planes = new LocalAgentPlanes(path.join(dir, 'planes'), pino({ level: 'silent' }), { allowPrivateNetworks: true });
const rows: string[] = [];

for (const backend of (process.env.BENCH_PLANES ?? 'dom_plane,computer_plane').split(',') as Backend[]) {
  const run = { run_id: randomUUID(), tenant_id: 'bench', profile_id: null, runtime: { compute_backend: backend } } as unknown as RunRecord;
  const lease = await planes.open(run);
  await lease.plane.act({ type: 'NAVIGATE', url: `${site.url}/static` });
  await new Promise((r) => setTimeout(r, 1500));
  for (const brain of brains) {
    const total: number[] = [];
    const shotMs: number[] = [];
    const thinkMs: number[] = [];
    const actMs: number[] = [];
    let history: Action[] = [];
    let step = new AbortController();
    for (let i = 0; i < TURNS + 5; i++) {
      if (conversational.has(brain.id) && history.length >= STEP) {
        history = [];
        step = new AbortController();
      }
      const t0 = performance.now();
      const shot = await lease.plane.screenshot();
      const t1 = performance.now();
      // "stuck": the fake clicks the middle of a page where nothing changes
      const out = conversational.has(brain.id)
        ? await brain.think([{ screenshot: shot }], 'click, stuck', history, { width: shot.width, height: shot.height }, step.signal)
        : await brain.think([{ screenshot: shot }], 'click, stuck', history.slice(-5), { width: shot.width, height: shot.height });
      const t2 = performance.now();
      await lease.plane.act(out.action);
      const t3 = performance.now();
      history.push(out.action);
      if (i < 5) continue; // warm-up
      shotMs.push(t1 - t0);
      thinkMs.push(t2 - t1);
      actMs.push(t3 - t2);
      total.push(t3 - t0);
    }
    const line = (name: string, xs: number[]) => `${name} p50 ${pct(xs, 50).toFixed(1)} / p99 ${pct(xs, 99).toFixed(1)} ms`;
    rows.push(`${backend.padEnd(15)} ${brain.id.padEnd(13)} turn ${line('', total)} | screenshot${line('', shotMs)} | think${line('', thinkMs)} | act${line('', actMs)}`);
  }
  await lease.close();
}
await planes.close();
await Promise.all([site.close(), fake.close(), claude.close(), gpt.close()]);
console.log(`bench/brains: ${TURNS} turns per row against an instant fake model (loopback), 1280x720 screenshots; load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
for (const r of rows) console.log(r);
