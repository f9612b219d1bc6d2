// The real gateway for the benchmark, with the store named by the first
// argument (sqlite, the default, memory, or postgres or redis with its URL as
// the second), one tenant with the limiter off, request logs discarded. Prints
// URL, token and a queued run id on stdout as JSON; a second tenant's token,
// whose 100 runs of 200 recorded steps each fill a runs list page, beside a
// thousand small runs of a third.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig } from '../../gateway/config.ts';
import { createGateway } from '../../gateway/server.ts';

const dir = await mkdtemp(path.join(tmpdir(), 'runplane-bench-'));
const token = 'b'.repeat(64);
const listToken = 'l'.repeat(64);
const otherToken = 'o'.repeat(64);
const keys = path.join(dir, 'keys.json');
const tenantKey = (tenant_id: string) => ({ tenant_id, rate_limit_per_minute: 0, max_concurrent_runs: 10_000_000 });
await writeFile(keys, JSON.stringify({ tenant_keys: { [token]: tenantKey('bench'), [listToken]: tenantKey('lister'), [otherToken]: tenantKey('others') } }));
const store = process.argv[2];
const storeUrl = process.argv[3] ? { [store === 'redis' ? 'SERVICE_REDIS_URL' : 'SERVICE_DATABASE_URL']: process.argv[3] } : {};
const config = { ...loadConfig({ SERVICE_PORT: '0', SERVICE_DATA_DIR: dir, SERVICE_TENANT_KEYS_PATH: keys, SERVICE_RUNNER: 'off', SERVICE_STATE: store === 'memory' ? 'memory' : 'sqlite', ...storeUrl }) };
const sink = new Writable({ write: (_c, _e, cb) => cb() });
const gw = await createGateway(config, { logStream: sink });
const url = await gw.listen();
const tenant = (await gw.services.tenants.resolve(token))!;
const run = await gw.services.runs.accept(tenant, {
  plan: { steps: [{ intent: 'open', type: 'navigate', url: 'https://example.com/' }], runtime: {} },
  runtime: { compute_backend: 'computer_plane', proxy_provider: 'residential-c', max_cost: 1, max_time_minutes: 1 },
  cua_model: 'default-cua',
  detached: true,
});
// a run the size a finished one has (its 50-step plan and 50 step entries in the row, ~25 KB): a status poll reads all of it or a projection
const big = await gw.services.runs.accept(tenant, {
  plan: { steps: Array.from({ length: 50 }, (_, i) => ({ intent: `click item ${i} on the listing page`, type: 'click', params: { selector: `#item-${i}` } })), runtime: {} },
  runtime: { compute_backend: 'dom_plane', proxy_provider: 'residential-c', max_cost: 1, max_time_minutes: 1 },
  cua_model: 'default-cua',
  detached: true,
});
const stored = (await gw.services.runs.get(tenant, big.run_id)) as unknown as Record<string, unknown>;
const steps = Array.from({ length: 50 }, (_, i) => ({ path: `steps[${i}]`, type: 'click', intent: `click item ${i} on the listing page`, success: true, final_url: `https://shop.example.com/item/${i}`, page_title: `Item ${i} - Shop`, attempts: 1 }));
type Row = { run_id: string; tenant_id: string; status: string; created_at: string };
await gw.services.state.runs<Row>().put({ ...(stored as Row), steps, events: steps.map((st) => `${new Date().toISOString()} ${st.path} click ok`) } as Row);
// a page of GET /v1/runs?limit=100 over runs this size (~60 KB rows) reads each run's lifecycle, not its steps
const lister = (await gw.services.tenants.resolve(listToken))!;
const long = Array.from({ length: 200 }, (_, i) => ({ intent: `fill field ${i} of the form`, type: 'type', params: { selector: `#field-${i}`, text: `value ${i}` } }));
const longSteps = long.map((st, i) => ({ path: `steps[${i}]`, type: st.type, intent: st.intent, success: true, final_url: `https://shop.example.com/form?page=${i}`, page_title: 'Form', attempts: 1 }));
for (let i = 0; i < 100; i++) {
  const r = await gw.services.runs.accept(lister, { plan: { steps: long, runtime: {} }, runtime: { compute_backend: 'dom_plane', proxy_provider: 'residential-c', max_cost: 1, max_time_minutes: 1 }, cua_model: 'default-cua', detached: true });
  const rec = (await gw.services.runs.get(lister, r.run_id)) as unknown as Row;
  await gw.services.state.runs<Row>().put({ ...rec, steps: longSteps, events: longSteps.map((st) => `${new Date().toISOString()} ${st.path} type ok`) } as Row);
}
// a thousand runs of a third tenant: a list (and a store that lists by reading every run) pays for what is not on its page
const others = (await gw.services.tenants.resolve(otherToken))!;
for (let i = 0; i < 1000; i++) await gw.services.runs.accept(others, { plan: { steps: [{ intent: 'open', type: 'navigate', url: 'https://example.com/' }], runtime: {} }, runtime: { compute_backend: 'dom_plane', proxy_provider: 'residential-c', max_cost: 1, max_time_minutes: 1 }, cua_model: 'default-cua', detached: true });
process.stdout.write(JSON.stringify({ url, token, run_id: run.run_id, big_run_id: big.run_id, list_token: listToken }) + '\n');
// its data dir goes with it: a bench run leaves nothing behind in the temp dir
process.on('SIGTERM', () => void gw.close().then(() => rm(dir, { recursive: true, force: true })).then(() => process.exit(0)));
