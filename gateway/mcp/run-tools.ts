// The run tools and the run resources. run_submit goes through POST /v1/predict's own
// handler (its checks, plan policy, Idempotency, rate token, concurrency slot), with the
// body checked by predict.schema.json first as the route does; the reads call the runs
// service as the /v1/runs routes do. Another tenant's run is 404 here as there.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { badRequest, isServiceError } from '../errors.ts';
import { describeError, validator } from '../../schemas/index.ts';
import { predictRoutes } from '../routes/predict.ts';
import { resultBody, runDir, statusBody } from '../runs/records.ts';
import { traceDir } from '../trace/trace-fields.ts';
import type { Ctx } from '../context.ts';
import { json, requireScope, scrub, type McpContext, type ToolArgs, type ToolOutput } from './context.ts';
import type { JsonSchema } from '../../schemas/index.ts';

const predict = validator('predict.schema.json');
const predictRoute = predictRoutes.find((r) => r.path === '/v1/predict')!;
/** How long a trace read waits for an ended run's bundle to be written. */
const TRACE_WAIT_MS = 20_000;

/** A large image inside a result is not for a model's context: the trace has it. */
function withoutScreenshots(body: ReturnType<typeof resultBody>): Record<string, unknown> {
  const steps = (body.steps as Array<Record<string, unknown>> | undefined)?.map((s) => (typeof s.screenshot_b64 === 'string' ? { ...s, screenshot_b64: `<omitted: ${s.screenshot_b64.length} base64 characters; the run's trace has it>` } : s));
  return { ...body, ...(steps ? { steps } : {}) };
}

/** The submission, through the predict route's handler on a context that carries only what it reads. */
export function runSubmitTool(schema: () => JsonSchema) {
  return async (c: McpContext, args: ToolArgs): Promise<ToolOutput> => {
    const allowed = new Set(Object.keys((schema().properties as Record<string, unknown>) ?? {}));
    for (const k of Object.keys(args)) if (!allowed.has(k)) throw badRequest(`${k}: is not allowed (run_submit takes a plan and the run fields of POST /v1/predict)`);
    if (args.plan === undefined && args.micro === undefined) throw badRequest('plan: is required (an inline plan, or a micro plan reference)');
    const body: Record<string, unknown> = { ...args, action: 'run', detached: true };
    if (!predict(body)) {
      predictRoute.body?.precheck?.(body);
      throw badRequest(describeError('', predict.errors));
    }
    const shim = { state: { tenant: c.tenant(), body }, get: () => '', set: () => undefined, body: undefined as unknown };
    await predictRoute.handler(shim as unknown as Ctx, c.s);
    return json(shim.body);
  };
}

async function runStatus(c: McpContext, args: ToolArgs): Promise<ToolOutput> {
  requireScope(c, 'status');
  return json(await c.s.runs.status(c.tenant(), String(args.run_id)));
}

async function runResult(c: McpContext, args: ToolArgs): Promise<ToolOutput> {
  requireScope(c, 'result');
  return json(withoutScreenshots(resultBody(await c.s.runs.get(c.tenant(), String(args.run_id)))));
}

async function runCancel(c: McpContext, args: ToolArgs): Promise<ToolOutput> {
  requireScope(c, 'run');
  return json(statusBody(await c.s.runs.cancel(c.tenant(), String(args.run_id))));
}

async function runEvents(c: McpContext, args: ToolArgs): Promise<ToolOutput> {
  requireScope(c, 'logs');
  const run = await c.s.runs.get(c.tenant(), String(args.run_id));
  const limit = typeof args.limit === 'number' ? args.limit : 100;
  const all = await c.s.runs.history(run.run_id, typeof args.after === 'number' ? args.after : undefined);
  const events = all.slice(0, limit);
  const last = events[events.length - 1];
  return json({ run_id: run.run_id, status: run.status, events, more: all.length > events.length, ...(last ? { next_after: last.seq } : {}) });
}

export const RUN_TOOLS: Record<string, { description: string; readOnly?: boolean; run(c: McpContext, args: ToolArgs): Promise<ToolOutput> }> = {
  run_status: { description: "A run's status body: status, phase, halt_class, failure_help", readOnly: true, run: runStatus },
  run_result: { description: "A run's result body: status, summary, steps (screenshots left to the trace), extraction_quality. The rows are the resource runplane://runs/{run_id}/rows", readOnly: true, run: runResult },
  run_cancel: { description: 'Cancel a run; answers its status after the cancel', run: runCancel },
  run_events: { description: "A run's events, oldest first (after: the seq of the last one read; limit)", readOnly: true, run: runEvents },
};

// ------------------------------------------------------------------ resources

export const RUN_RESOURCE_TEMPLATES = [
  { uriTemplate: 'runplane://runs/{run_id}/result', name: 'run-result', title: "A run's result", description: 'The result body of one of your runs', mimeType: 'application/json' },
  { uriTemplate: 'runplane://runs/{run_id}/rows', name: 'run-rows', title: "A run's extracted rows", description: 'The rows a run extracted (extracted_rows.json)', mimeType: 'application/json' },
  { uriTemplate: 'runplane://runs/{run_id}/trace', name: 'run-trace', title: "A run's trace listing", description: "The run's trace manifest and its files (read each at its url with your token)", mimeType: 'application/json' },
];

const RESOURCE_URI = /^runplane:\/\/runs\/([A-Za-z0-9_-]{1,128})\/(result|rows|trace)$/;
/** The code MCP gives a resource that does not exist. */
const RESOURCE_NOT_FOUND = -32002;

/** The tenant's recent runs, three resources each. */
export async function listRunResources(c: McpContext): Promise<Array<{ uri: string; name: string; mimeType: string }>> {
  if (!c.tenant().scopes.includes('result')) return [];
  const page = await c.s.runs.list(c.tenant(), { limit: 20 });
  return page.items.flatMap((r) =>
    (['result', 'rows', 'trace'] as const).map((kind) => ({ uri: `runplane://runs/${r.run_id}/${kind}`, name: `${r.run_id} ${kind}`, mimeType: 'application/json' })),
  );
}

/** A resource's text; a refusal of the service is the protocol's error for a read (resources have no isError). */
export async function readRunResource(c: McpContext, uri: string): Promise<{ contents: Array<{ uri: string; mimeType: string; text: string }> }> {
  const m = RESOURCE_URI.exec(uri);
  if (!m) throw new McpError(ErrorCode.InvalidParams, 'unknown resource: runplane://runs/{run_id}/result, /rows or /trace');
  const [, id = '', kind] = m;
  try {
    requireScope(c, kind === 'trace' ? 'logs' : 'result');
    const run = await c.s.runs.get(c.tenant(), id);
    let text: string;
    if (kind === 'result') text = JSON.stringify(withoutScreenshots(resultBody(run)), null, 2);
    else if (kind === 'rows') {
      const rows = await readFile(path.join(runDir(c.s.config.dataDir, run), 'extracted_rows.json'), 'utf8').catch(() => undefined);
      if (rows === undefined) throw new McpError(RESOURCE_NOT_FOUND, `run ${run.run_id} has no extracted rows`, { uri });
      text = rows;
    } else {
      const closing = c.s.traceClosing(run.run_id);
      if (closing) await Promise.race([closing, new Promise((r) => setTimeout(r, TRACE_WAIT_MS).unref())]);
      const manifest = await readFile(path.join(traceDir(c.s.config.dataDir, run), 'manifest.json'), 'utf8').catch(() => undefined);
      if (manifest === undefined) throw new McpError(RESOURCE_NOT_FOUND, `no trace has been recorded for run ${run.run_id} (yet)`, { uri });
      const m2 = JSON.parse(manifest) as { paths?: string[] };
      const base = `${c.base}/v1/runs/${encodeURIComponent(run.run_id)}/trace`;
      text = JSON.stringify({ run_id: run.run_id, manifest: m2, files: ['manifest.json', ...(m2.paths ?? [])].map((p) => ({ path: p, url: `${base}/${p}` })) }, null, 2);
    }
    return { contents: [{ uri, mimeType: 'application/json', text }] };
  } catch (err) {
    if (err instanceof McpError) throw err;
    if (isServiceError(err)) throw new McpError(err.status === 404 ? RESOURCE_NOT_FOUND : ErrorCode.InvalidRequest, err.detail, { uri, status: err.status });
    throw new McpError(ErrorCode.InternalError, scrub('the resource could not be read'));
  }
}

