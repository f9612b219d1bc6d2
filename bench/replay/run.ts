// bench/replay (issue 45): the same shop task (three brain steps, then a mechanical
// read) run three ways on a real gateway, agent and Chromium, with the scripted
// model answering in --delay ms (1,500: a hosted model's pace): the first run
// (the brain does every step, the run compiles), its replay (the compiled plan:
// no model call), and a replay after the site's next release renamed and moved
// one control (healed by one grounding call). Model calls, wall time and rows of
// each, per round; the compiled plan is deleted between rounds.
// --plane computer: the same task on computer_plane (the three brain steps, no read:
// that would be a model call there; the item page's hits stand for the rows), with a
// fourth kind, the Search button moved a few pixels (followed by its visual anchor).
// Usage: npm run bench:replay [-- --rounds 3 --delay 1500 --plane dom|computer]
import { loadavg } from 'node:os';
import { RUNNER_ENV, newToken, startGateway } from '../../test/support/gateway.ts';
import { fakeBrainsDir, startFakeModel } from '../../test/support/fake-model.ts';
import { pageOffset, shopBrain, shopPlan, shopPlanComputer, startReplaySite } from '../../test/support/replay-site.ts';
import { numArg, pct, strArg } from '../stats.ts';

const ROUNDS = numArg('rounds', 3);
const DELAY = numArg('delay', 1500);
const COMPUTER = strArg('plane', 'dom') === 'computer';
const plan = COMPUTER ? shopPlanComputer : shopPlan;

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const [site, fake] = await Promise.all([startReplaySite(), startFakeModel()]);
fake.script = shopBrain(site);
const token = newToken();
const { dir, brainsPath } = await fakeBrainsDir(fake, 'bench-replay');
const gw = await startGateway({ dir, env: { ...RUNNER_ENV, SERVICE_BRAINS_PATH: brainsPath }, keys: { [token]: { tenant_id: 'bench', rate_limit_per_minute: 0, default_compute_backend: COMPUTER ? 'computer_plane' : 'dom_plane' } } });

const kinds = ['first run', 'replay', 'moved control', 'healed replay'] as const;
const seen = new Map<string, { calls: number[]; ms: number[]; rows: string[] }>(kinds.map((k) => [k, { calls: [], ms: [], rows: [] }]));

async function measure(kind: (typeof kinds)[number], body: Body): Promise<Body> {
  fake.requests.length = 0;
  const items = site.hits.get('/item/1') ?? 0;
  const t0 = performance.now();
  const r = await gw.req('POST', '/v1/predict', { token, body: { detached: false, ...body } });
  const ms = performance.now() - t0;
  if (r.status !== 200 || r.body.status !== 'succeeded') throw new Error(`${kind}: ${r.status} ${r.text.slice(0, 500)}`);
  const res = await gw.req('GET', `/v1/runs/${r.body.run_id}/result`, { token });
  const s = seen.get(kind)!;
  s.calls.push(fake.requests.length);
  s.ms.push(ms);
  s.rows.push(COMPUTER ? String((site.hits.get('/item/1') ?? 0) - items) : String(res.body.steps.at(-1).rows));
  return r.body;
}

try {
  // one warm-up run: the first browser start is not what a replay saves
  // (it also finds where the screen draws the page, for the scripted brain's points on computer_plane)
  await gw.req('POST', '/v1/predict', { token, body: { detached: false, plan: [{ intent: 'warm up', type: 'navigate', url: `${site.url}/calibrate` }, { intent: 'look', type: 'default-cua', max_steps: 1 }] } });
  if (COMPUTER) fake.script = shopBrain(site, await pageOffset(fake.requests[0]!.body));
  fake.delayMs = DELAY;
  for (let round = 0; round < ROUNDS; round++) {
    site.changed = false;
    site.shifted = false;
    const first = await measure('first run', { plan: plan(site), replay: { cache: true } });
    const id = (await gw.req('GET', `/v1/runs/${first.run_id}/compiled_plan`, { token })).body.compiled_plan_id as string;
    await measure('replay', { plan: plan(site), replay: { cache: true } });
    // dom_plane finds the moved button by its role and name; computer_plane by its visual anchor
    site.shifted = true;
    await measure('moved control', { replay: { compiled_plan_id: id } });
    site.shifted = false;
    site.changed = true;
    await measure('healed replay', { replay: { compiled_plan_id: id } });
    await gw.req('DELETE', `/v1/compiled_plans/${id}`, { token });
  }
  const base = seen.get('first run')!;
  console.log(`bench/replay: ${COMPUTER ? 'computer_plane' : 'dom_plane'}, ${ROUNDS} round(s), model delay ${DELAY} ms, load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  for (const k of kinds) {
    const s = seen.get(k)!;
    const wall = pct(s.ms, 50);
    console.log(`${k.padEnd(14)} model calls ${s.calls.join('/')}  wall p50 ${(wall / 1000).toFixed(2)} s (${s.ms.map((m) => (m / 1000).toFixed(2)).join('/')})  rows ${s.rows.join('/')}  ${k === 'first run' ? '' : `speed-up ${(pct(base.ms, 50) / wall).toFixed(1)}x`}`);
  }
} finally {
  await gw.close();
  await Promise.all([site.close(), fake.close()]);
}
