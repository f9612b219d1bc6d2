import { expect } from 'chai';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startGateway, newToken, until, RUNNER_ENV, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';
import { readSchema } from '../../schemas/index.ts';
import { connectPlane } from '../../gateway/planes/index.ts';
import type { PlaneEndpoint } from '../../gateway/runner/planes.ts';
import { fleetOf } from '../../gateway/routes/cdp.ts';
import { scrub } from '../../gateway/mcp/context.ts';
import { CALL, PNG_MAGIC, TOOLS, bodyOf, refusal, textOf, type Body } from '../support/mcp.ts';

// The MCP server on a real gateway with real local agents and Chromium, reached with the
// official SDK's Client over Streamable HTTP (POST /mcp): tools and their schemas, a
// browser driven by snapshot refs, a plan run and its resources, tenant isolation,
// clients that go away, and hostile input. stdio (`runplane mcp`): mcp-stdio.test.ts.
describe('MCP server: the SDK Client over Streamable HTTP (real agents and Chromium)', function () {
  this.timeout(300_000);
  let gw: TestGateway;
  let site: Site;
  const a = newToken();
  const b = newToken();
  const readOnly = newToken();
  const slow = newToken();
  const open: Client[] = [];

  before(async () => {
    site = await startSite();
    gw = await startGateway({
      env: { ...RUNNER_ENV, SERVICE_MCP_IDLE_SECONDS: '3' },
      keys: {
        [a]: { tenant_id: 'acme', rate_limit_per_minute: 0, max_concurrent_runs: 4, scopes: ['run', 'status', 'result', 'logs'] },
        [b]: { tenant_id: 'other', rate_limit_per_minute: 0, max_concurrent_runs: 2, scopes: ['run', 'status', 'result', 'logs'] },
        [readOnly]: { tenant_id: 'acme', rate_limit_per_minute: 0, scopes: ['status'] },
        [slow]: { tenant_id: 'slow', rate_limit_per_minute: 1, max_concurrent_runs: 5 },
      },
    });
  });
  after(async () => {
    for (const c of open) await c.close().catch(() => undefined);
    await gw?.close();
    await site?.close();
  });

  async function connect(token: string, headers: Record<string, string> = { Authorization: `Bearer ${token}` }): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
    const client = new Client({ name: 'runplane-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`), { requestInit: { headers } });
    await client.connect(transport);
    open.push(client);
    return { client, transport };
  }
  const call = (client: Client, name: string, args: Record<string, unknown>) => client.callTool({ name, arguments: args }, undefined, CALL) as Promise<CallToolResult>;
  /** The tenant's browser sessions that have not ended, as the API lists them. */
  const liveSessions = async (token = a): Promise<string[]> => {
    const r = await gw.req('GET', '/v1/sessions?limit=100', { token });
    return (r.body.sessions as Body[]).filter((s) => s.status !== 'ended').map((s) => s.session_id as string);
  };
  const sessionOf = async (id: string, token = a): Promise<Body> => (await gw.req('GET', `/v1/sessions/${id}`, { token })).body as Body;
  /** The plane agent slot a live browser session is on (what a relay reaches). */
  const agentOf = async (id: string): Promise<PlaneEndpoint> => {
    const s = gw.gateway.services;
    return s.sessions.endpointOf(await s.sessions.get((await s.tenants.resolve(a))!, id), fleetOf(s))!;
  };
  /** Whether that agent still holds a session's browser (its health, asked with the session's token, says one is bound; nothing else runs meanwhile). */
  const agentHolds = async (ep: PlaneEndpoint): Promise<boolean> => {
    const plane = connectPlane({ url: ep.url, secret: ep.secret, ca: ep.ca, deadlineMs: 5000, retries: 0 });
    plane.token = ep.token;
    try {
      return (await plane.health()).session_bound === true;
    } catch {
      return false; // the agent is gone, or no longer knows the session's token
    } finally {
      plane.disconnect();
    }
  };

  it('takes the host\'s file paths out of messages, and leaves URLs alone', () => {
    expect(scrub('Error: spawn /usr/lib/chromium/chromium ENOENT at Object.<anonymous> (/work/main/build/agents/dom/main.js:12:3)')).to.equal('Error: spawn <path> ENOENT at Object.<anonymous> (<path>:12:3)');
    expect(scrub("cannot read file:///etc/passwd or '/home/runner/.data/x'")).to.equal("cannot read <path> or '<path>'");
    expect(scrub('navigation failed: net::ERR_NAME_NOT_RESOLVED at https://shop.example/a/b/c?q=/x/y')).to.equal('navigation failed: net::ERR_NAME_NOT_RESOLVED at https://shop.example/a/b/c?q=/x/y');
  });

  it('lists every tool; each input schema compiles with ajv on its own and is the project schema it comes from', async () => {
    const { client } = await connect(a);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).to.deep.equal([...TOOLS].sort());
    for (const t of tools) {
      const ajv = new Ajv2020({ strict: false });
      const validate = ajv.compile(t.inputSchema);
      expect(t.inputSchema.type, t.name).to.equal('object');
      expect(JSON.stringify(t.inputSchema), t.name).not.to.include('schemas.runplane.dev');
      if (t.name === 'navigate') {
        expect(validate({ session_id: 'ses_0123456789abcdef', url: 'https://example.com/' })).to.equal(true);
        expect(validate({ session_id: 'ses_0123456789abcdef', url: 'file:///etc/passwd' })).to.equal(false);
      }
    }
    const byName = Object.fromEntries(tools.map((t) => [t.name, t.inputSchema as Body]));
    // session_open takes POST /v1/sessions' body, field for field
    expect(Object.keys(byName.session_open!.properties)).to.deep.equal(Object.keys(readSchema('sessions.schema.json').properties as Body));
    // run_submit takes predict's run fields and the plan schema itself
    const submit = new Ajv2020({ strict: false }).compile(byName.run_submit!);
    expect(submit({ plan: [{ intent: 'open', type: 'navigate', url: 'https://example.com/' }], compute_backend: 'dom_plane' })).to.equal(true);
    expect(submit({ plan: [{ type: 'navigate' }] }), 'a step without intent').to.equal(false);
    expect(submit({ action: 'status', run_id: 'x' })).to.equal(false);
    expect(byName.extract!.properties.extract).to.be.an('object');
    // the access log has the MCP requests as answered, with the tenant and never the token
    const lines = gw.logs.filter((l) => l.includes('"path":"/mcp"')).map((l) => JSON.parse(l) as Body);
    expect(lines.filter((l) => l.method === 'POST' && l.tenant_id === 'acme').map((l) => l.status)).to.include.members([200, 202]);
    expect(gw.logs.join('\n')).not.to.include(a);
  });

  it('drives a dom_plane browser: open, navigate, snapshot, type and click by ref, keys, scroll, screenshot (PNG), extract rows, close', async () => {
    const { client } = await connect(a);
    const opened = bodyOf(await call(client, 'session_open', { compute_backend: 'dom_plane', viewport: { width: 1024, height: 700 } }));
    const id = opened.session_id as string;
    expect(id).to.match(/^ses_[a-z0-9]{32}$/);
    expect(opened).to.include({ status: 'live', compute_backend: 'dom_plane' });
    expect(JSON.stringify(opened)).not.to.match(/token|owner|endpoint|ticket/);

    const nav = bodyOf(await call(client, 'navigate', { session_id: id, url: `${site.url}/form` }));
    expect(nav).to.include({ url: `${site.url}/form`, title: 'Contact', http_status: 200 });
    const snap = textOf(await call(client, 'snapshot', { session_id: id }));
    expect(snap).to.include(`- Page URL: ${site.url}/form`);
    const ref = (role: string, name: string): string => {
      const m = new RegExp(`${role} "${name}" \\[ref=(e\\d+)\\]`).exec(snap);
      expect(m, `${role} "${name}" in\n${snap}`).to.not.equal(null);
      return m![1]!;
    };
    const name = ref('textbox', 'Name');
    const send = ref('button', 'Send');
    bodyOf(await call(client, 'type', { session_id: id, ref: name, text: 'Ada' }));
    bodyOf(await call(client, 'type', { session_id: id, label: 'Email', text: 'ada@example.com' }));
    const clicked = bodyOf(await call(client, 'click', { session_id: id, ref: send }));
    expect(clicked.url).to.equal(`${site.url}/success?email=ada%40example.com&name=Ada`);
    const after = textOf(await call(client, 'snapshot', { session_id: id }));
    expect(after).to.include('heading "Thanks, Ada" [level=1]');
    // a ref of the page that is gone names nothing
    const stale = await call(client, 'click', { session_id: id, ref: send });
    expect(stale.isError).to.equal(true);
    expect(textOf(stale)).to.match(/take a new snapshot/);

    // keys and the wheel, on a page that writes down what it received
    bodyOf(await call(client, 'navigate', { session_id: id, url: `${site.url}/rows/play` }));
    bodyOf(await call(client, 'press_key', { session_id: id, key: 'x' }));
    const scrolled = bodyOf(await call(client, 'scroll', { session_id: id, direction: 'down', amount: 3 }));
    expect(scrolled.scroll_y).to.be.above(0);
    const played = textOf(await call(client, 'snapshot', { session_id: id }));
    expect(played).to.include('"key x"');
    expect(played).to.include('"scrolled"');

    const shot = await call(client, 'screenshot', { session_id: id });
    expect(shot.isError).to.not.equal(true);
    const image = shot.content.find((c) => c.type === 'image');
    expect(image?.mimeType).to.equal('image/png');
    const png = Buffer.from(image!.data as string, 'base64');
    expect(png.subarray(0, 8).toString('hex')).to.equal(PNG_MAGIC);
    expect(png.readUInt32BE(16)).to.equal(1024);

    // rows as a plan's extract_data step reads them, and a link found by its role and name
    bodyOf(await call(client, 'navigate', { session_id: id, url: `${site.url}/list?page=1` }));
    const rows = bodyOf(await call(client, 'extract', { session_id: id, extract: { item_selector: '.card', max_items: 2, fields: [{ name: 'title', type: 'str', selector: 'h2' }, { name: 'price', type: 'float', selector: '.price' }, { name: 'url', type: 'str', selector: 'a', attr: 'href' }] } }));
    expect(rows.rows).to.deep.equal([
      { title: 'Flat 1', price: 100.5, url: `${site.url}/item/1` },
      { title: 'Flat 2', price: 200.5, url: `${site.url}/item/2` },
    ]);
    const next = bodyOf(await call(client, 'click', { session_id: id, role: 'link', name: 'Next' }));
    expect(next.url).to.equal(`${site.url}/list?page=2`);

    const closed = bodyOf(await call(client, 'session_close', { session_id: id }));
    expect(closed).to.include({ status: 'ended', end_reason: 'released' });
    const gone = await call(client, 'navigate', { session_id: id, url: `${site.url}/form` });
    expect(gone.isError).to.equal(true);
    expect(textOf(gone)).to.match(/no browser session/);
    expect(await liveSessions()).to.deep.equal([]);
  });

  it('drives a computer_plane browser by coordinates, keys and screenshots; what needs the DOM says so', async () => {
    const { client } = await connect(a);
    const id = bodyOf(await call(client, 'session_open', { compute_backend: 'computer_plane' })).session_id as string;
    const nav = bodyOf(await call(client, 'navigate', { session_id: id, url: `${site.url}/counter` }));
    expect(nav.url).to.equal(`${site.url}/counter`);
    const hits = site.hits.get('/hit') ?? 0;
    // the page's button covers its top-left 600x400: on the display, below the browser's toolbar
    bodyOf(await call(client, 'click', { session_id: id, x: 300, y: 300 }));
    expect(await until(async () => (site.hits.get('/hit') ?? 0) > hits, 15_000), 'the click reached the page').to.equal(true);
    bodyOf(await call(client, 'press_key', { session_id: id, key: 'ctrl+r' }));
    const shot = await call(client, 'screenshot', { session_id: id });
    const image = shot.content.find((c) => c.type === 'image');
    expect(Buffer.from(image!.data as string, 'base64').subarray(0, 8).toString('hex')).to.equal(PNG_MAGIC);
    for (const [tool, args] of [['snapshot', { session_id: id }], ['click', { session_id: id, selector: '#hit' }], ['extract', { session_id: id, extract: { item_selector: 'p', fields: [{ name: 'n', type: 'int' }] } }]] as const) {
      const r = await call(client, tool, args);
      expect(r.isError, tool).to.equal(true);
      expect(textOf(r), tool).to.match(/dom_plane/);
    }
    expect(bodyOf(await call(client, 'session_close', { session_id: id })).end_reason).to.equal('released');
  });

  it("runs a plan: run_submit, run_status, run_events, run_result, and the run's result, rows and trace as resources", async () => {
    const { client } = await connect(a);
    const plan = {
      steps: [
        { intent: 'open the listings', type: 'navigate', url: `${site.url}/list?page=1`, required: true },
        { intent: 'read the flats', type: 'extract_data', extract: { schema_name: 'flats', item_selector: '.card', max_items: 3, fields: [{ name: 'title', type: 'str', selector: 'h2' }, { name: 'price', type: 'float', selector: '.price' }] } },
      ],
      runtime: { compute_backend: 'dom_plane' },
    };
    const started = bodyOf(await call(client, 'run_submit', { plan }));
    const runId = started.run_id as string;
    expect(runId).to.be.a('string');
    expect(await until(async () => ['succeeded', 'failed', 'cancelled'].includes(bodyOf(await call(client, 'run_status', { run_id: runId })).status as string), 120_000)).to.equal(true);
    const result = bodyOf(await call(client, 'run_result', { run_id: runId }));
    expect(result.status, JSON.stringify(result)).to.equal('succeeded');
    const events = bodyOf(await call(client, 'run_events', { run_id: runId, limit: 500 }));
    expect((events.events as Body[]).map((e) => e.type)).to.include('run.ended');
    const page = bodyOf(await call(client, 'run_events', { run_id: runId, limit: 1 }));
    expect(page.events).to.have.length(1);
    expect(page.more).to.equal(true);
    const rest = bodyOf(await call(client, 'run_events', { run_id: runId, after: page.next_after }));
    expect((rest.events as Body[])[0]!.seq).to.equal((page.next_after as number) + 1);

    const { resourceTemplates } = await client.listResourceTemplates();
    expect(resourceTemplates.map((t) => t.uriTemplate)).to.include.members(['runplane://runs/{run_id}/result', 'runplane://runs/{run_id}/rows', 'runplane://runs/{run_id}/trace']);
    const { resources } = await client.listResources();
    expect(resources.map((r) => r.uri)).to.include(`runplane://runs/${runId}/rows`);
    const rowsText = (await client.readResource({ uri: `runplane://runs/${runId}/rows` })).contents[0] as { text: string };
    expect((JSON.parse(rowsText.text) as Body[]).map((r) => r.title)).to.deep.equal(['Flat 1', 'Flat 2', 'Flat 3']);
    const resultText = (await client.readResource({ uri: `runplane://runs/${runId}/result` })).contents[0] as { text: string };
    expect(JSON.parse(resultText.text)).to.include({ run_id: runId, status: 'succeeded' });
    const traceText = ((await client.readResource({ uri: `runplane://runs/${runId}/trace` })).contents[0] as { text: string }).text;
    const trace = JSON.parse(traceText) as Body;
    expect((trace.files as Body[]).map((f) => f.path)).to.include('manifest.json');
    expect((trace.files as Body[])[0]!.url).to.equal(`${gw.url}/v1/runs/${runId}/trace/manifest.json`);
    // no file path of the host in what a client reads
    expect(traceText).not.to.include(gw.dir);
    expect(resultText.text).not.to.include(gw.dir);
    expect(await refusal(client.readResource({ uri: 'runplane://runs/nope/rows' }))).to.match(/not found/);
    expect(await refusal(client.readResource({ uri: 'file:///etc/passwd' }))).to.match(/unknown resource/);
  });

  it("another tenant's client reaches neither the first's browser session, its runs nor its MCP session", async () => {
    const { client: mine, transport } = await connect(a);
    const { client: theirs } = await connect(b);
    const id = bodyOf(await call(mine, 'session_open', {})).session_id as string;
    const runId = bodyOf(await call(mine, 'run_submit', { plan: [{ intent: 'open a page', type: 'navigate', url: `${site.url}/static` }], compute_backend: 'dom_plane' })).run_id as string;
    for (const [tool, args] of [['navigate', { session_id: id, url: `${site.url}/form` }], ['snapshot', { session_id: id }], ['screenshot', { session_id: id }], ['session_close', { session_id: id }]] as const) {
      const r = await call(theirs, tool, args);
      expect(r.isError, tool).to.equal(true);
      expect(textOf(r), tool).to.match(/no browser session/);
    }
    for (const tool of ['run_status', 'run_result', 'run_events', 'run_cancel']) {
      const r = await call(theirs, tool, { run_id: runId });
      expect(r.isError, tool).to.equal(true);
      expect(textOf(r), tool).to.match(/not found/);
    }
    expect(await refusal(theirs.readResource({ uri: `runplane://runs/${runId}/result` }))).to.match(/not found/);
    const listed = (await theirs.listResources()).resources.map((r) => r.uri);
    expect(listed.some((u) => u.includes(runId))).to.equal(false);
    // the first tenant's MCP session id with the second tenant's token is no session at all
    const hijack = await fetch(`${gw.url}/mcp`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${b}`, 'Mcp-Session-Id': transport.sessionId!, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': '2025-06-18' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'snapshot', arguments: { session_id: id } } }),
    });
    expect(hijack.status).to.equal(404);
    expect(((await hijack.json()) as Body).detail).to.match(/no such MCP session/);
    // the browser session is still the first client's, live
    expect((await sessionOf(id)).status).to.equal('live');
    expect(bodyOf(await call(mine, 'session_close', { session_id: id })).status).to.equal('ended');
    // the run ends before the next test counts the tenant's slots
    expect(await until(async () => ['succeeded', 'failed', 'cancelled'].includes(bodyOf(await call(mine, 'run_status', { run_id: runId })).status as string), 120_000)).to.equal(true);
    // its slot is freed just after its ended row is committed (which the status reads)
    expect(await until(async () => (await gw.gateway.services.limits.runningCount('acme')) === 0, 10_000)).to.equal(true);
  });

  it('a client that goes away leaves no browser behind: DELETE /mcp releases at once, a vanished client at SERVICE_MCP_IDLE_SECONDS', async () => {
    const before = await gw.gateway.services.limits.runningCount('acme');
    expect(before).to.equal(0);
    const { client, transport } = await connect(a);
    const one = bodyOf(await call(client, 'session_open', {})).session_id as string;
    const two = bodyOf(await call(client, 'session_open', {})).session_id as string;
    expect((await liveSessions()).sort()).to.deep.equal([one, two].sort());
    expect(await gw.gateway.services.limits.runningCount('acme')).to.equal(2);
    const agents = [await agentOf(one), await agentOf(two)];
    expect(await agentHolds(agents[0]!)).to.equal(true);
    expect(await agentHolds(agents[1]!)).to.equal(true);
    await transport.terminateSession();
    expect(await until(async () => (await liveSessions()).length === 0, 30_000)).to.equal(true);
    // the agents let go of the browsers (the row says ended first; the plane closes right after)
    expect(await until(async () => !(await agentHolds(agents[0]!)) && !(await agentHolds(agents[1]!)), 30_000)).to.equal(true);
    expect((await sessionOf(one)).end_reason).to.equal('released');
    expect(await gw.gateway.services.limits.runningCount('acme')).to.equal(0);

    // a client that just disappears (no DELETE): its streams close, and the idle timeout ends it
    const gone = await connect(a);
    const three = bodyOf(await call(gone.client, 'session_open', {})).session_id as string;
    const agent = await agentOf(three);
    expect(await agentHolds(agent)).to.equal(true);
    await gone.client.close();
    expect(await until(async () => (await sessionOf(three)).status === 'ended', 30_000)).to.equal(true);
    expect(await until(async () => !(await agentHolds(agent)), 30_000)).to.equal(true);
    expect(await liveSessions()).to.deep.equal([]);
    expect(await gw.gateway.services.limits.runningCount('acme')).to.equal(0);
    // its MCP session is gone too: the id answers 404
    const again = await fetch(`${gw.url}/mcp`, { method: 'GET', headers: { Authorization: `Bearer ${a}`, 'Mcp-Session-Id': gone.transport.sessionId!, Accept: 'text/event-stream' } });
    expect(again.status).to.equal(404);
  });

  it('hostile input: no or a wrong token is 401 {detail}, bodies too large or malformed are 400 {detail}, bad arguments and scopes are tool errors, never a crash', async () => {
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
    const post = (headers: Record<string, string>, body: string) => fetch(`${gw.url}/mcp`, { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers }, body });
    const none = await post({}, JSON.stringify(init));
    expect(none.status).to.equal(401);
    expect(none.headers.get('www-authenticate')).to.equal('Bearer');
    expect(((await none.json()) as Body).detail).to.match(/Authorization: Bearer/);
    const wrong = await post({ Authorization: `Bearer ${newToken()}` }, JSON.stringify(init));
    expect(wrong.status).to.equal(401);
    expect(((await wrong.json()) as Body).detail).to.match(/matches no tenant/);
    // X-Service-Token opens a session as the bearer does
    const byHeader = await post({ 'X-Service-Token': a }, JSON.stringify(init));
    expect(byHeader.status).to.equal(200);
    expect(byHeader.headers.get('mcp-session-id')).to.match(/^[0-9a-f-]{36}$/);
    await byHeader.body?.cancel();
    const huge = await post({ Authorization: `Bearer ${a}` }, JSON.stringify({ ...init, pad: 'x'.repeat(2 * 1024 * 1024) }));
    expect(huge.status).to.equal(400);
    expect(((await huge.json()) as Body).detail).to.match(/exceeds the limit/);
    const broken = await post({ Authorization: `Bearer ${a}` }, '{"jsonrpc": ');
    expect(broken.status).to.equal(400);
    expect(((await broken.json()) as Body).detail).to.match(/malformed JSON/);
    const deep = await post({ Authorization: `Bearer ${a}` }, `${'['.repeat(5000)}${']'.repeat(5000)}`);
    expect(deep.status).to.equal(400);
    const noSession = await post({ Authorization: `Bearer ${a}` }, JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }));
    expect(noSession.status).to.equal(400);
    expect(((await noSession.json()) as Body).detail).to.match(/Mcp-Session-Id/);
    const unknown = await post({ Authorization: `Bearer ${a}`, 'Mcp-Session-Id': 'not-a-session' }, JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }));
    expect(unknown.status).to.equal(404);

    const { client } = await connect(a);
    const refusals: Array<[string, Record<string, unknown>, RegExp]> = [
      ['navigate', { session_id: 'ses_0123456789abcdef', url: 'file:///etc/passwd' }, /url/],
      ['navigate', { session_id: '../../etc', url: 'https://example.com/' }, /session_id/],
      ['navigate', { session_id: 'ses_0123456789abcdef', url: 'https://example.com/' }, /no browser session/],
      ['click', { session_id: 'ses_0123456789abcdef', x: 10 }, /y/],
      ['type', { session_id: 'ses_0123456789abcdef', text: 'x'.repeat(100_001) }, /text/],
      ['press_key', { session_id: 'ses_0123456789abcdef', key: 'ctrl+alt+$(reboot)' }, /key/],
      ['session_open', { compute_backend: 'gpu_plane' }, /compute_backend/],
      ['session_open', { profile_id: '../etc' }, /profile_id/],
      ['extract', { session_id: 'ses_0123456789abcdef', extract: { fields: [] } }, /item_selector/],
      ['run_submit', { plan: 'steps' }, /plan/],
      ['run_submit', { action: 'status', run_id: 'x' }, /action/],
      ['run_submit', { plan: [{ intent: 'x', type: 'navigate', url: 'https://example.com/' }], micro: 'x.json' }, /plan/],
      ['run_status', { run_id: '../../etc/passwd' }, /run_id/],
      ['run_status', { run_id: 'run_doesnotexist' }, /not found/],
      ['run_events', { run_id: 'x', limit: 10_000 }, /limit/],
      ['drop_database', {}, /unknown tool/],
    ];
    for (const [tool, args, why] of refusals) {
      const r = await call(client, tool, args);
      expect(r.isError, `${tool} ${JSON.stringify(args).slice(0, 80)}: ${textOf(r)}`).to.equal(true);
      expect(textOf(r), tool).to.match(why);
      expect(textOf(r)).not.to.match(/\bat \S+ \(|node_modules|\/work\//);
    }
    // a token without the run scope reads but cannot open a browser or start a run
    const { client: reader } = await connect(readOnly);
    for (const [tool, args] of [['session_open', {}], ['run_submit', { plan: [{ intent: 'x', type: 'navigate', url: 'https://example.com/' }] }]] as const) {
      const r = await call(reader, tool, args);
      expect(r.isError, tool).to.equal(true);
      expect(textOf(r), tool).to.match(/lacks the 'run' scope/);
    }
    // a run start takes a rate token as POST /v1/predict does: past the tenant's rate, the 429's detail is the tool error
    const { client: limited } = await connect(slow);
    const plan = [{ intent: 'open a page', type: 'navigate', url: `${site.url}/static` }];
    const first = bodyOf(await call(limited, 'run_submit', { plan, compute_backend: 'dom_plane' }));
    const second = await call(limited, 'run_submit', { plan, compute_backend: 'dom_plane' });
    expect(second.isError).to.equal(true);
    expect(textOf(second)).to.match(/rate limit of 1 requests per minute exceeded; retry in \d+ s/);
    expect(await until(async () => ['succeeded', 'failed', 'cancelled'].includes(bodyOf(await call(limited, 'run_status', { run_id: first.run_id })).status as string), 120_000)).to.equal(true);
    // and the server is still serving
    expect((await client.listTools()).tools).to.have.length(TOOLS.length);
    expect(await liveSessions()).to.deep.equal([]);
  });

});
