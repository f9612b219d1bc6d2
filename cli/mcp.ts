// `runplane mcp`: runplane's MCP server on stdio, for hosts that start MCP servers as
// commands (Claude Desktop, Cursor, editors). It holds no browser and runs no tool
// itself: every request is passed to the gateway's /mcp (Streamable HTTP, the tenant
// token as a bearer), so both transports serve the same tools, schemas, limits and
// tenant isolation. When the host closes stdin the gateway's MCP session is ended
// (DELETE /mcp), and with it the browser sessions it opened.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListResourcesRequestSchema, ListResourceTemplatesRequestSchema, ListToolsRequestSchema, ReadResourceRequestSchema } from '@modelcontextprotocol/sdk/types.js';

/** A browser start or a long page can take a while on a busy fleet: the SDK's 60 s default is too short for a tool call. */
const CALL_TIMEOUT_MS = 10 * 60_000;

interface Upstream {
  client: Client;
  http: StreamableHTTPClientTransport;
}

/** Serves stdio until the host closes it; the exit code. Nothing but MCP messages goes to stdout. */
export async function serveStdio(base: string, token: string, version = '1'): Promise<number> {
  const connect = async (): Promise<Upstream> => {
    const client = new Client({ name: 'runplane-cli', version });
    const http = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
    await client.connect(http);
    return { client, http };
  };
  let up: Upstream;
  try {
    up = await connect();
  } catch (err) {
    process.stderr.write(`runplane mcp: cannot open an MCP session on ${base}/mcp: ${(err as Error).message}\n`);
    return 2;
  }
  /**
   * One request upstream. The gateway answers 404 for an MCP session it no longer has (it
   * restarted, or the session idled out): a new one is opened and the request sent again once.
   * Its browser sessions went with the old one; a tool naming them says so.
   */
  const ask = async <T>(f: (c: Client) => Promise<T>): Promise<T> => {
    try {
      return await f(up.client);
    } catch (err) {
      if (!(err instanceof StreamableHTTPError) || err.code !== 404) throw err;
      process.stderr.write('runplane mcp: the gateway no longer has this MCP session; opening a new one\n');
      const old = up;
      up = await connect();
      void old.client.close().catch(() => undefined);
      return f(up.client);
    }
  };
  const info = up.client.getServerVersion();
  const instructions = up.client.getInstructions();
  const server = new Server({ name: info?.name ?? 'runplane', version: info?.version ?? version }, { capabilities: { tools: {}, resources: {} }, ...(instructions ? { instructions } : {}) });
  const opts = { timeout: CALL_TIMEOUT_MS };
  server.setRequestHandler(ListToolsRequestSchema, (req) => ask((c) => c.listTools(req.params, opts)));
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    try {
      return await ask((c) => c.callTool(req.params, undefined, opts));
    } catch (err) {
      // a gateway that cannot be reached is the tool's failure, told to the model, not a broken server
      return { content: [{ type: 'text' as const, text: `the runplane gateway did not answer: ${(err as Error).message.slice(0, 300)}` }], isError: true };
    }
  });
  server.setRequestHandler(ListResourcesRequestSchema, (req) => ask((c) => c.listResources(req.params, opts)));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, (req) => ask((c) => c.listResourceTemplates(req.params, opts)));
  server.setRequestHandler(ReadResourceRequestSchema, (req) => ask((c) => c.readResource(req.params, opts)));
  const ended = new Promise<void>((resolve) => {
    server.onclose = resolve;
    // the stdio transport does not watch for the end of its input: the host going away is that end
    process.stdin.once('end', resolve);
    process.stdin.once('close', resolve);
  });
  await server.connect(new StdioServerTransport());
  await ended;
  await up.http.terminateSession().catch(() => undefined);
  await up.client.close().catch(() => undefined);
  return 0;
}
