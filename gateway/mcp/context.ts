// What a tool of one MCP session works with: the gateway's services, the tenant the
// session is bound to (refreshed from each request's token, so a scope taken away or a
// token revoked applies at once), and the browser sessions this MCP session opened.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ServiceError } from '../errors.ts';
import type { Scope, Tenant } from '../http/tenants.ts';
import type { Services } from '../services.ts';

export interface McpContext {
  readonly s: Services;
  tenant(): Tenant;
  /** the gateway's address as the client reached it (links in answers) */
  readonly base: string;
  /** the browser sessions this MCP session opened, each with its detach from the session's clients */
  readonly browsers: Map<string, () => void>;
}

export type ToolArgs = Record<string, unknown>;

/** What a tool answers: text (JSON of a service body), or an image beside it; isError for a refusal. */
export type ToolOutput = CallToolResult;

export function requireScope(c: McpContext, scope: Scope): void {
  if (!c.tenant().scopes.includes(scope)) throw new ServiceError('forbidden', `this token lacks the '${scope}' scope`);
}

export function json(body: unknown): ToolOutput {
  const structured = body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : undefined;
  return { content: [{ type: 'text', text: JSON.stringify(body, null, 2) }], ...(structured ? { structuredContent: structured } : {}) };
}

/** Absolute paths (the agent host's files, a stack's frames) out of a message that leaves the gateway. */
export function scrub(text: string): string {
  // a path stands alone (after a space, a quote, a bracket): the path of a URL is not the host's
  return text
    .replace(/file:\/\/\S*/gi, '<path>')
    .replace(/(?<![\w:/.=?&%#~-])(?:\/[\w.@+-]+){2,}\/?/g, '<path>')
    .slice(0, 1000);
}
