// What the MCP layer costs over the gateway's other ways to the same browser, on one
// dom_plane session (local agent, loopback fixture site), alternating rounds:
//   screenshot:  MCP `screenshot` vs POST /v1/sessions/{id}/computer {action: screenshot}
//   navigate:    MCP `navigate`   vs puppeteer's page.goto over a second session's CDP URL
//   round trip:  MCP tools/list   vs GET /v1/health (the transport and its auth alone)
//   stdio:       tools/list through `runplane mcp` (stdio -> /mcp) vs over HTTP
// and the absolute cost of `snapshot` and `click` by ref. Prints p50/p99 in ms and the load average.
// Usage: npm run bench:mcp -- [--n 30]
import path from 'node:path';
import { loadavg } from 'node:os';
import puppeteer from 'puppeteer-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { REPO_ROOT } from '../../shared/build.mjs';
import { startGateway, newToken } from '../../test/support/gateway.ts';
import { startSite } from '../../test/support/site.ts';
import { numArg, pct } from '../stats.ts';

const N = numArg('n', 30);
const token = newToken();
const fmt = (xs: number[]): string => `p50 ${pct(xs, 50).toFixed(1).padStart(7)} ms  p99 ${pct(xs, 99).toFixed(1).padStart(7)} ms`;
const text = (r: CallToolResult): string => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

async function timed(xs: number[], f: () => Promise<unknown>): Promise<void> {
  const t = performance.now();
  await f();
  xs.push(performance.now() - t);
}

const site = await startSite();
const gw = await startGateway({ env: { SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1' }, keys: { [token]: { tenant_id: 'bench', rate_limit_per_minute: 0, max_concurrent_runs: 5 } } });
const client = new Client({ name: 'bench', version: '1' });
await client.connect(new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
const stdio = new Client({ name: 'bench-stdio', version: '1' });
await stdio.connect(new StdioClientTransport({ command: process.execPath, args: [path.join(REPO_ROOT, 'cli/runplane.js'), 'mcp'], env: { PATH: process.env.PATH ?? '', RUNPLANE_URL: gw.url, RUNPLANE_TOKEN: token } }));
const call = async (name: string, args: Record<string, unknown>): Promise<CallToolResult> => {
  const r = (await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as CallToolResult;
  if (r.isError) throw new Error(`${name}: ${text(r)}`);
  return r;
};
const id = (JSON.parse(text(await call('session_open', { compute_backend: 'dom_plane' }))) as { session_id: string }).session_id;
// the CDP baseline drives a session of its own: a CDP client on the MCP session's browser stalled its screenshots (seen here at load 22)
const made = await gw.req('POST', '/v1/sessions', { token, body: { compute_backend: 'dom_plane', keep_alive: true } });
const browser = await puppeteer.connect({ browserWSEndpoint: made.body.cdp_url as string, headers: { 'X-Service-Token': token }, defaultViewport: null });
const tab = (await browser.pages())[0]!;

const t: Record<string, number[]> = {};
const at = (k: string): number[] => (t[k] ??= []);
const pages = [`${site.url}/static`, `${site.url}/form`];
for (let i = 0; i < N; i++) {
  const url = pages[i % 2]!;
  await timed(at('navigate mcp'), () => call('navigate', { session_id: id, url }));
  await timed(at('navigate cdp'), () => tab.goto(url, { waitUntil: 'domcontentloaded' }));
  await timed(at('screenshot mcp'), () => call('screenshot', { session_id: id }));
  await timed(at('screenshot rest'), async () => {
    const r = await fetch(`${gw.url}/v1/sessions/${id}/computer`, { method: 'POST', headers: { 'X-Service-Token': token, 'Content-Type': 'application/json' }, body: '{"action":"screenshot"}' });
    await r.arrayBuffer();
  });
  await timed(at('round trip mcp tools/list'), () => client.listTools());
  await timed(at('round trip rest /v1/health'), async () => (await fetch(`${gw.url}/v1/health`)).arrayBuffer());
  await timed(at('stdio tools/list'), () => stdio.listTools());
  await call('navigate', { session_id: id, url: `${site.url}/form` });
  let snap = '';
  await timed(at('snapshot mcp'), async () => (snap = text(await call('snapshot', { session_id: id }))));
  const ref = /textbox "Name" \[ref=(e\d+)\]/.exec(snap)?.[1];
  await timed(at('click by ref mcp'), () => call('click', { session_id: id, ref }));
}
await browser.disconnect();
await gw.req('DELETE', `/v1/sessions/${made.body.session_id as string}`, { token });
await call('session_close', { session_id: id });
await stdio.close();
await client.close();
const [l1, l5] = loadavg();
process.stdout.write(`bench:mcp  n=${N}  load average ${l1!.toFixed(1)} (1 min) ${l5!.toFixed(1)} (5 min)\n`);
for (const [k, xs] of Object.entries(t)) process.stdout.write(`  ${k.padEnd(28)} ${fmt(xs)}\n`);
await gw.close();
await site.close();
