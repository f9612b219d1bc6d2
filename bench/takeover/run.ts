// bench/takeover: the lag from a click on the viewer's live screen to the page's own
// click event, on both planes, beside a baseline: the same click sent straight to the
// plane (dom_plane: CDP through the session's cdp_url; computer_plane: xdotool on the
// session's display through the agent's xdotool op). A real gateway with local agents;
// the fixture page stamps its click event with its Date.now(), the viewer page (real
// Chromium, puppeteer-core) stamps its mouseup the same way, on the same host's clock.
// Issue 42's goal: p50 under 100 ms. Usage: npm run bench:takeover [-- --n 20]
import { mkdtemp, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import puppeteer, { type Page } from 'puppeteer-core';
import { loadConfig } from '../../gateway/config.ts';
import { createGateway } from '../../gateway/server.ts';
import { startInputSite } from '../../test/support/input-site.ts';
import { launchTestBrowser } from '../../test/support/browser.ts';
import { numArg, pct } from '../stats.ts';

const N = numArg('n', 20);
// the baseline's xdotool click has no behavioural jitter either (the relay never adds it)
process.env.SERVICE_BEHAVIORAL_JITTER = '0';
const pad = await startInputSite();
const dir = await mkdtemp(path.join(tmpdir(), 'runplane-bench-takeover-'));
const token = 't'.repeat(64);
const keys = path.join(dir, 'keys.json');
await writeFile(keys, JSON.stringify({ tenant_keys: { [token]: { tenant_id: 'bench', scopes: ['run', 'status', 'result', 'logs', 'operator'], rate_limit_per_minute: 0 } } }));
const config = loadConfig({ SERVICE_PORT: '0', SERVICE_DATA_DIR: path.join(dir, 'gw'), SERVICE_TENANT_KEYS_PATH: keys, SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1' });
const gw = await createGateway(config, { logStream: new Writable({ write: (_c, _e, cb) => cb() }) });
const url = await gw.listen();
const headers = { 'X-Service-Token': token, 'Content-Type': 'application/json' };
const load0 = loadavg()[0]!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const clickAt = (): Promise<number> => pad.next((e) => e.kind === 'click').then((e) => e.t);

const browser = await launchTestBrowser();
const viewer = await browser.newPage();
await viewer.goto(`${url}/ui/`);
await viewer.evaluate(`sessionStorage.setItem('runplane.token', ${JSON.stringify(token)})`);
await viewer.evaluateOnNewDocument('addEventListener("mouseup", () => { window.__up = Date.now(); }, true)');

const rows: string[] = [];
for (const plane of ['dom_plane', 'computer_plane'] as const) {
  const s = (await (await fetch(`${url}/v1/sessions`, { method: 'POST', headers, body: JSON.stringify({ compute_backend: plane, keep_alive: true }) })).json()) as { session_id: string; cdp_url: string };
  const client = await puppeteer.connect({ browserWSEndpoint: s.cdp_url, headers: { 'X-Service-Token': token }, defaultViewport: null });
  const pages = await client.pages();
  const tab: Page = pages.find((p) => p.browserContext() !== client.defaultBrowserContext()) ?? pages[0]!;
  await tab.goto(`${pad.url}/pad`);
  await tab.bringToFront();

  // the viewer: a click on the live screen, from its mouseup to the page's click event
  await viewer.goto(`${url}/ui/#/sessions/${s.session_id}/live`);
  await viewer.reload();
  await viewer.waitForFunction("Number(document.querySelector('#live-screen')?.dataset.frames ?? 0) > 0", { timeout: 60_000 });
  const box = (await (await viewer.$('#live-screen'))!.boundingBox())!;
  const [w, h] = await viewer.$eval('#live-screen', (c) => [(c as unknown as { width: number }).width, (c as unknown as { height: number }).height]);
  // points on the part of the screen the viewer shows without scrolling (the pad's background there)
  const point = (i: number): [number, number] => [200 + (i % 5) * 100, 300 + (i % 3) * 40];
  const relayed: number[] = [];
  for (let i = 0; i < N; i++) {
    const [x, y] = point(i);
    const seen = clickAt();
    await viewer.mouse.click(box.x + ((x + 0.5) * box.width) / w, box.y + ((y + 0.5) * box.height) / h);
    const t = await seen.catch(async (err: Error) => {
      throw new Error(`${err.message}; the viewer says: ${await viewer.$eval('#live-status', (e) => e.textContent).catch(() => '?')} sent ${await viewer.$eval('#live-screen', (e) => (e as unknown as { dataset: Record<string, string> }).dataset.sent).catch(() => '?')} box ${JSON.stringify(await (await viewer.$('#live-screen'))?.boundingBox())} was ${JSON.stringify(box)}`);
    });
    relayed.push(t - (await viewer.evaluate('window.__up') as number));
    await sleep(250);
  }

  // the baseline: the same click straight to the plane, from the release sent to the page's click event
  const direct: number[] = [];
  const record = await gw.services.sessions.get((await gw.services.tenants.resolve(token))!, s.session_id);
  const fleet = { secret: undefined };
  let offset = [0, 0];
  if (plane === 'computer_plane') {
    // where the page sits on the display: one click at a known display point, read back from the page
    const seen = pad.next((e) => e.kind === 'click');
    await gw.services.sessions.planeCall(record, fleet, 'xdotool', 'POST', { argv: ['mousemove', '640', '500', 'click', '1'] }, true);
    const e = await seen;
    offset = [640 - e.x!, 500 - e.y!];
    await sleep(250);
  }
  for (let i = 0; i < N; i++) {
    const [x, y] = point(i);
    const seen = clickAt();
    let t0: number;
    if (plane === 'dom_plane') {
      await tab.mouse.move(x, y);
      await tab.mouse.down();
      t0 = Date.now();
      await tab.mouse.up();
    } else {
      const at = [String(x + offset[0]!), String(y + offset[1]!)];
      await gw.services.sessions.planeCall(record, fleet, 'xdotool', 'POST', { argv: ['mousemove', ...at, 'mousedown', '1'] }, true);
      t0 = Date.now();
      await gw.services.sessions.planeCall(record, fleet, 'xdotool', 'POST', { argv: ['mouseup', '1'] }, true);
    }
    direct.push((await seen) - t0);
    await sleep(250);
  }
  await client.disconnect();
  await fetch(`${url}/v1/sessions/${s.session_id}`, { method: 'DELETE', headers });
  const f = (xs: number[]) => `p50 ${pct(xs, 50).toFixed(0).padStart(4)} ms  p95 ${pct(xs, 95).toFixed(0).padStart(4)} ms`;
  rows.push(`${plane.padEnd(15)} viewer -> page click  ${f(relayed)}   baseline (${plane === 'dom_plane' ? 'CDP' : 'xdotool'} straight to the plane)  ${f(direct)}`);
}

console.log(`click lag, ${N} clicks per plane (goal: viewer p50 < 100 ms)`);
for (const r of rows) console.log(r);
console.log(`load average ${load0.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after, on ${cpus().length} cores`);
await browser.close();
await gw.close();
await pad.close();
