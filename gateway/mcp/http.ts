// POST|GET|DELETE /mcp: the MCP server over Streamable HTTP. The route's auth is the
// gateway's (X-Service-Token or Authorization: Bearer, the same constant-time lookup;
// 401 {detail} without a token), its POST body goes through the same capped, depth-checked
// JSON reader as every route, and then the SDK's transport answers. Each MCP session
// (Mcp-Session-Id) lives on the replica that initialized it and is bound to its tenant:
// another tenant's session id, like an unknown one, is 404. A session ends on DELETE, on
// its transport's close, after SERVICE_MCP_IDLE_SECONDS with no request in flight and no
// stream open, and at shutdown; its browser sessions are released with it.
import { randomUUID } from 'node:crypto';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { ServiceError, badRequest, notFound } from '../errors.ts';
import { readJsonBody } from '../http/body.ts';
import type { Tenant } from '../http/tenants.ts';
import type { Ctx } from '../context.ts';
import type { RouteSpec } from '../routes/route.ts';
import type { Services } from '../services.ts';
import type { McpContext } from './context.ts';
import { mcpServer } from './server.ts';

/** MCP sessions one tenant may hold open on one replica (each holds a server and maybe browsers). */
export const MAX_MCP_SESSIONS_PER_TENANT = 32;

interface Entry {
  id?: string;
  tenant: Tenant;
  transport: StreamableHTTPServerTransport;
  server: Server;
  context: McpContext;
  browsers: Map<string, () => void>;
  /** requests (and streams) of this session still open */
  inflight: number;
  lastActive: number;
  closed: boolean;
}

export class McpHub {
  private readonly entries = new Map<string, Entry>();
  private readonly sweep: NodeJS.Timeout;

  constructor(private readonly s: Services) {
    this.sweep = setInterval(() => this.closeIdle(), Math.max(200, Math.min(5000, Math.floor(s.config.mcpIdleMs / 4))));
    this.sweep.unref();
  }

  /** How many MCP sessions are open (a tenant's, or all). */
  count(tenantId?: string): number {
    return [...this.entries.values()].filter((e) => tenantId === undefined || e.tenant.tenant_id === tenantId).length;
  }

  async handle(ctx: Ctx): Promise<void> {
    const tenant = ctx.state.tenant!;
    const sid = ctx.get('mcp-session-id');
    const body = ctx.method === 'POST' ? await readJsonBody(ctx, { maxBytes: this.s.config.maxBodyBytes, maxDepth: this.s.config.maxJsonDepth }) : undefined;
    let entry: Entry;
    if (sid) {
      const found = this.entries.get(sid);
      if (!found || found.tenant.tenant_id !== tenant.tenant_id) throw notFound('no such MCP session (it ended or idled out): initialize a new one');
      // the token of this request decides: a scope taken away applies from now on
      found.tenant = tenant;
      entry = found;
    } else {
      if (ctx.method !== 'POST' || !isInitializeRequest(body)) throw badRequest('Mcp-Session-Id header is required: an MCP session starts with an initialize request');
      if (this.count(tenant.tenant_id) >= MAX_MCP_SESSIONS_PER_TENANT) {
        throw new ServiceError('concurrency_limited', `at the limit of ${MAX_MCP_SESSIONS_PER_TENANT} open MCP sessions for this tenant; close one (DELETE /mcp) or let it idle out`, { 'Retry-After': '5' });
      }
      entry = this.open(tenant, `${ctx.protocol}://${ctx.host}`);
    }
    entry.inflight++;
    entry.lastActive = Date.now();
    ctx.respond = false;
    ctx.res.once('close', () => {
      entry.inflight--;
      entry.lastActive = Date.now();
    });
    await entry.transport.handleRequest(ctx.req, ctx.res, body);
    // an initialize the transport refused made no session: nothing of it stays
    if (!entry.id) await this.end(entry);
  }

  private open(tenant: Tenant, base: string): Entry {
    const browsers = new Map<string, () => void>();
    const entry = { tenant, browsers, inflight: 0, lastActive: Date.now(), closed: false } as Partial<Entry> as Entry;
    entry.context = { s: this.s, tenant: () => entry.tenant, base, browsers };
    entry.transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        entry.id = id;
        this.entries.set(id, entry);
        this.s.log.info({ tenant_id: tenant.tenant_id, mcp_session: id }, 'mcp session opened');
      },
      onsessionclosed: () => this.end(entry),
    });
    entry.transport.onclose = () => void this.end(entry);
    entry.server = mcpServer(entry.context, this.s.version.version, (tool, err) => this.s.log.error({ tenant_id: entry.tenant.tenant_id, tool, err: err.message }, 'mcp tool failed'));
    void entry.server.connect(entry.transport);
    return entry;
  }

  /** Ends an MCP session: it leaves the map first (no request finds it), then its browsers are released. */
  private async end(entry: Entry): Promise<void> {
    if (entry.closed) return;
    entry.closed = true;
    if (entry.id) this.entries.delete(entry.id);
    const released = [...entry.browsers.entries()].map(async ([id, detach]) => {
      // released before detached: the last client leaving would end it as client_disconnected
      await this.s.sessions
        .release(entry.tenant, id)
        .catch((err: Error) => this.s.log.warn({ session_id: id, err: err.message }, 'mcp: browser session release failed'))
        .finally(detach);
    });
    entry.browsers.clear();
    await Promise.all(released);
    await entry.server.close().catch(() => undefined);
    if (entry.id) this.s.log.info({ tenant_id: entry.tenant.tenant_id, mcp_session: entry.id, browsers: released.length }, 'mcp session closed');
  }

  private closeIdle(): void {
    const now = Date.now();
    for (const e of [...this.entries.values()]) {
      if (e.inflight <= 0 && now - e.lastActive >= this.s.config.mcpIdleMs) void this.end(e);
    }
  }

  /** Shutdown: every MCP session ends (the sessions service ends their browsers too). */
  async close(): Promise<void> {
    clearInterval(this.sweep);
    await Promise.all([...this.entries.values()].map((e) => this.end(e)));
  }
}

const hubs = new WeakMap<Services, McpHub>();

/** The gateway's MCP hub, made at its first request and ended with the gateway's watchers at shutdown. */
export function hubOf(s: Services): McpHub {
  let hub = hubs.get(s);
  if (!hub) {
    const made = new McpHub(s);
    hubs.set(s, (hub = made));
    s.watchers.add(() => void made.close());
  }
  return hub;
}

const route = (method: 'GET' | 'POST' | 'DELETE', summary: string): RouteSpec => ({
  method,
  path: '/mcp',
  summary,
  tags: ['mcp'],
  auth: true,
  bearer: true,
  // JSON-RPC over Streamable HTTP: the MCP specification describes it, not this OpenAPI document
  hidden: true,
  async handler(ctx, s) {
    await hubOf(s).handle(ctx);
  },
});

export const mcpRoutes: RouteSpec[] = [
  route('POST', 'MCP (Streamable HTTP): JSON-RPC messages of an MCP session; an initialize without Mcp-Session-Id opens one'),
  route('GET', "MCP (Streamable HTTP): the session's server-sent event stream"),
  route('DELETE', 'MCP (Streamable HTTP): end the session; its browser sessions are released'),
];
