import { expect } from 'chai';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startGateway, newToken, until, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';
import { cli } from '../support/cli.ts';
import { CALL, PNG_MAGIC, TOOLS, bodyOf, textOf, type Body } from '../support/mcp.ts';

const root = path.resolve(import.meta.dirname, '../..');

// `runplane mcp` as an MCP host starts it (a command speaking MCP on stdio), driven by the
// SDK's Client over its stdio transport against a real gateway, local dom_plane agents and
// Chromium: the same tools as /mcp, a browser released when the host goes away (the CLI's
// DELETE /mcp), a new MCP session when the gateway lost the old one, clean refusals.
describe('MCP server: `runplane mcp` on stdio (real gateway, agents and Chromium)', function () {
  this.timeout(300_000);
  let gw: TestGateway;
  let site: Site;
  const a = newToken();
  const open: Client[] = [];

  before(async () => {
    site = await startSite();
    gw = await startGateway({
      env: { SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1', SERVICE_MCP_IDLE_SECONDS: '60' },
      keys: { [a]: { tenant_id: 'acme', rate_limit_per_minute: 0, max_concurrent_runs: 4 } },
    });
  });
  after(async () => {
    for (const c of open) await c.close().catch(() => undefined);
    await gw?.close();
    await site?.close();
  });

  const call = (client: Client, name: string, args: Record<string, unknown>) => client.callTool({ name, arguments: args }, undefined, CALL) as Promise<CallToolResult>;
  const liveSessions = async (): Promise<string[]> => {
    const r = await gw.req('GET', '/v1/sessions?limit=100', { token: a });
    return (r.body.sessions as Body[]).filter((s) => s.status !== 'ended').map((s) => s.session_id as string);
  };
  const sessionOf = async (id: string): Promise<Body> => (await gw.req('GET', `/v1/sessions/${id}`, { token: a })).body as Body;

  it('stdio: `runplane mcp` serves the same tools through the gateway, and its end releases its browser', async () => {
    const env = { PATH: process.env.PATH ?? '', RUNPLANE_URL: gw.url, RUNPLANE_TOKEN: a };
    const transport = new StdioClientTransport({ command: process.execPath, args: [path.join(root, 'cli/runplane.js'), 'mcp'], cwd: root, env, stderr: 'pipe' });
    const client = new Client({ name: 'runplane-stdio-test', version: '1.0.0' });
    await client.connect(transport);
    open.push(client);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).to.deep.equal([...TOOLS].sort());
    const id = bodyOf(await call(client, 'session_open', { compute_backend: 'dom_plane' })).session_id as string;
    bodyOf(await call(client, 'navigate', { session_id: id, url: `${site.url}/form` }));
    const snap = textOf(await call(client, 'snapshot', { session_id: id }));
    const email = /textbox "Email" \[ref=(e\d+)\]/.exec(snap)?.[1];
    expect(email, snap).to.be.a('string');
    bodyOf(await call(client, 'type', { session_id: id, ref: email, text: 'stdio@example.com', submit: true }));
    const shot = await call(client, 'screenshot', { session_id: id });
    const image = shot.content.find((c) => c.type === 'image');
    expect(Buffer.from(image!.data as string, 'base64').subarray(0, 8).toString('hex')).to.equal(PNG_MAGIC);
    const bad = await call(client, 'click', { session_id: id, selector: '#nothing-here' });
    expect(bad.isError).to.equal(true);
    expect(textOf(bad)).to.match(/no element matches/);
    expect(await liveSessions()).to.deep.equal([id]);
    // the host closes stdin: the CLI ends its MCP session (DELETE /mcp), and the gateway releases the browser
    const deletes = (): number => gw.logs.filter((l) => l.includes('"method":"DELETE","path":"/mcp"') && l.includes('"tenant_id":"acme"')).length;
    const before = deletes();
    await client.close();
    expect(await until(async () => (await sessionOf(id)).status === 'ended', 30_000)).to.equal(true);
    expect(await until(async () => deletes() > before, 10_000), 'the CLI sent DELETE /mcp').to.equal(true);
    expect((await sessionOf(id)).end_reason).to.equal('released');
    expect(await gw.gateway.services.limits.runningCount('acme')).to.equal(0);
  });

  it('stdio: when the gateway no longer has its MCP session, `runplane mcp` opens a new one and the host sees no error', async () => {
    const env = { PATH: process.env.PATH ?? '', RUNPLANE_URL: gw.url, RUNPLANE_TOKEN: a };
    const opened = (): string[] => gw.logs.map((l) => JSON.parse(l) as Body).filter((l) => l.msg === 'mcp session opened' && l.tenant_id === 'acme').map((l) => l.mcp_session as string);
    const before = opened().length;
    const client = new Client({ name: 'runplane-stdio-test', version: '1.0.0' });
    await client.connect(new StdioClientTransport({ command: process.execPath, args: [path.join(root, 'cli/runplane.js'), 'mcp'], cwd: root, env, stderr: 'pipe' }));
    open.push(client);
    expect(await until(async () => opened().length === before + 1, 10_000)).to.equal(true);
    const first = opened().at(-1)!;
    // ended behind its back (as a gateway restart or an idle timeout would)
    const del = await fetch(`${gw.url}/mcp`, { method: 'DELETE', headers: { Authorization: `Bearer ${a}`, 'Mcp-Session-Id': first, 'Mcp-Protocol-Version': '2025-06-18' } });
    expect(del.status).to.equal(200);
    const r = await call(client, 'run_status', { run_id: 'run_doesnotexist' });
    expect(r.isError).to.equal(true);
    expect(textOf(r)).to.match(/not found/);
    expect(opened().length).to.equal(before + 2);
    await client.close();
  });

  it('stdio without a token or gateway: the CLI says why on stderr and exits 2, with nothing on stdout', async () => {
    const noToken = await cli(['mcp'], { RUNPLANE_URL: gw.url });
    expect(noToken.code).to.equal(2);
    expect(noToken.stderr).to.match(/no token/);
    expect(noToken.stdout).to.equal('');
    const badToken = await cli(['mcp'], { RUNPLANE_URL: gw.url, RUNPLANE_TOKEN: newToken() });
    expect(badToken.code).to.equal(2);
    expect(badToken.stderr).to.match(/cannot open an MCP session/);
    expect(badToken.stdout).to.equal('');
  });
});
