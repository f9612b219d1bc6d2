// bench/viewer: how fast the viewer shows a 500-step run, in Chromium through
// puppeteer-core, beside a baseline: the same run's result JSON opened raw in
// the same browser (its load event: a JSON document reports no paint). A real
// gateway on SQLite runs the plan first (a navigate and 500 zero-second waits
// in nested loops on dom_plane, every step recorded).
// Usage: npm run bench:viewer [-- --loads 5]
import { mkdtemp, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig } from '../../gateway/config.ts';
import { createGateway } from '../../gateway/server.ts';
import { startSite } from '../../test/support/site.ts';
import { launchTestBrowser } from '../../test/support/browser.ts';
import { numArg, pct } from '../stats.ts';

const LOADS = numArg('loads', 5);
const STEPS = 500;

const site = await startSite();
const dir = await mkdtemp(path.join(tmpdir(), 'runplane-bench-viewer-'));
const token = 'v'.repeat(64);
const keys = path.join(dir, 'keys.json');
await writeFile(keys, JSON.stringify({ tenant_keys: { [token]: { tenant_id: 'bench', rate_limit_per_minute: 0, default_compute_backend: 'dom_plane', max_time_minutes_per_run: 60 } } }));
const config = loadConfig({ SERVICE_PORT: '0', SERVICE_DATA_DIR: path.join(dir, 'gw'), SERVICE_TENANT_KEYS_PATH: keys, SERVICE_RUNNER: 'on', SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1' });
const gw = await createGateway(config, { logStream: new Writable({ write: (_c, _e, cb) => cb() }) });
const url = await gw.listen();
const load0 = loadavg()[0]!;

const t0 = performance.now();
// loops run at most 50 iterations each: ten of fifty
const plan = [{ intent: 'open', type: 'navigate', url: `${site.url}/static` }, { intent: 'pages', type: 'loop', loop_count: STEPS / 50, steps: [{ intent: 'ticks', type: 'loop', loop_count: 50, steps: [{ intent: 'tick', type: 'wait', seconds: 0 }] }] }];
const res = await fetch(`${url}/v1/predict`, { method: 'POST', headers: { 'X-Service-Token': token, 'Content-Type': 'application/json' }, body: JSON.stringify({ plan, detached: false, max_time_minutes: 30 }) });
const run = (await res.json()) as { run_id: string; status: string; steps: unknown[] };
if (run.status !== 'succeeded') throw new Error(`the run ended ${run.status}`);
console.log(`a ${run.steps.length}-step run recorded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

const browser = await launchTestBrowser();
const page = await browser.newPage();
await page.goto(`${url}/ui/`);
await page.evaluate(`sessionStorage.setItem('runplane.token', ${JSON.stringify(token)})`);

const viewer: { fcp: number; steps: number }[] = [];
const raw: number[] = [];
const fcpOf = `performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? NaN`;
for (let i = 0; i < LOADS; i++) {
  // the viewer: first paint, and the whole timeline in the DOM
  await page.goto('about:blank');
  await page.goto(`${url}/ui/#/runs/${run.run_id}`);
  await page.waitForFunction(`document.querySelectorAll('ol.steps li.step').length === ${run.steps.length}`, { timeout: 60_000, polling: 'mutation' });
  const stepsAt = (await page.evaluate('performance.now()')) as number;
  viewer.push({ fcp: (await page.evaluate(fcpOf)) as number, steps: stepsAt });
}
const rawPage = await browser.newPage();
await rawPage.setExtraHTTPHeaders({ 'X-Service-Token': token });
for (let i = 0; i < LOADS; i++) {
  await rawPage.goto('about:blank');
  await rawPage.goto(`${url}/v1/runs/${run.run_id}/result`, { waitUntil: 'load' });
  raw.push((await rawPage.evaluate(`performance.getEntriesByType('navigation')[0].loadEventEnd`)) as number);
}
const f = (n: number) => n.toFixed(0).padStart(8);
console.log(`\nbench/viewer: ${run.steps.length}-step run, ${LOADS} loads each, load average ${load0.toFixed(2)} at the start, ${loadavg()[0]!.toFixed(2)} at the end\n`);
console.log('ms after navigation start'.padEnd(44) + 'p50'.padStart(8) + 'max'.padStart(8));
console.log('viewer: first contentful paint'.padEnd(44) + f(pct(viewer.map((v) => v.fcp), 50)) + f(Math.max(...viewer.map((v) => v.fcp))));
console.log(`viewer: all ${run.steps.length} steps in the timeline`.padEnd(44) + f(pct(viewer.map((v) => v.steps), 50)) + f(Math.max(...viewer.map((v) => v.steps))));
console.log('baseline, raw result JSON: load event end'.padEnd(44) + f(pct(raw, 50)) + f(Math.max(...raw)));

await browser.close();
await gw.close();
await site.close();
