// One MCP server per MCP session, bound to its tenant: the SDK's low-level Server with
// the tools' input schemas as raw JSON Schema (bundled from schemas/*.schema.json; the
// high-level McpServer wants zod, which would be a second copy). Each call's arguments
// are checked by the source schema through the gateway's own ajv before a tool runs, and
// every refusal is a tool result with isError and the service's {detail} message.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListResourcesRequestSchema, ListResourceTemplatesRequestSchema, ListToolsRequestSchema, ReadResourceRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { isServiceError } from '../errors.ts';
import { describeError, type JsonSchema } from '../../schemas/index.ts';
import { BROWSER_TOOLS } from './browser-tools.ts';
import { RUN_RESOURCE_TEMPLATES, RUN_TOOLS, listRunResources, readRunResource, runSubmitTool } from './run-tools.ts';
import { SOURCE_VALIDATORS, toolSchemas } from './schemas.ts';
import { scrub, type McpContext, type ToolArgs, type ToolOutput } from './context.ts';

let schemas: Record<string, JsonSchema> | undefined;
/** Bundled once per process: the schema files do not change while it runs. */
export const mcpToolSchemas = (): Record<string, JsonSchema> => (schemas ??= toolSchemas());

const TOOLS: Record<string, { description: string; readOnly?: boolean; run(c: McpContext, args: ToolArgs): Promise<ToolOutput> }> = {
  ...BROWSER_TOOLS,
  run_submit: { description: 'Start a run of a plan (as POST /v1/predict does, detached): plan (steps, or {steps, runtime}) and the submission fields (compute_backend, proxy and geo, max_cost, max_time_minutes, profile_id, ...). Answers run_id; follow it with run_status, run_events, run_result', run: runSubmitTool(() => mcpToolSchemas().run_submit!) },
  ...RUN_TOOLS,
};

const INSTRUCTIONS =
  "runplane's browsers and runs. Browser: session_open, then navigate, snapshot (refs like e12), click/type by ref, screenshot, extract, session_close (a browser is also released when this MCP session ends or idles). Runs: run_submit a plan, then run_status / run_events / run_result; rows and traces are resources (runplane://runs/{run_id}/rows).";

function failure(detail: string): ToolOutput {
  return { content: [{ type: 'text', text: detail }], isError: true };
}

export function mcpServer(c: McpContext, version: string, onError: (tool: string, err: Error) => void): Server {
  const server = new Server({ name: 'runplane', title: 'runplane', version }, { capabilities: { tools: {}, resources: {} }, instructions: INSTRUCTIONS });
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: Object.entries(TOOLS).map(([name, t]) => ({
      name,
      description: t.description,
      inputSchema: mcpToolSchemas()[name] as { type: 'object' },
      annotations: { readOnlyHint: t.readOnly === true, openWorldHint: true },
    })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    const name = req.params.name;
    const tool = Object.hasOwn(TOOLS, name) ? TOOLS[name] : undefined;
    if (!tool) return failure(`unknown tool '${String(name).slice(0, 64)}'; tools/list names them`);
    const args = (req.params.arguments ?? {}) as ToolArgs;
    const check = (SOURCE_VALIDATORS as Record<string, ((a: unknown) => boolean) & { errors?: unknown }>)[name];
    if (check && !check(args)) return failure(describeError('', check.errors as Parameters<typeof describeError>[1]));
    try {
      return await tool.run(c, args);
    } catch (err) {
      if (isServiceError(err)) return failure(err.detail);
      // anything else is logged with its cause, and the client gets no stack and no path
      onError(name, err as Error);
      return failure(scrub(`the ${name} tool failed inside the gateway; it has been logged`));
    }
  });
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({ resourceTemplates: RUN_RESOURCE_TEMPLATES }));
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({ resources: await listRunResources(c) }));
  server.setRequestHandler(ReadResourceRequestSchema, async (req) => readRunResource(c, req.params.uri));
  return server;
}
