// /v1/runs/{run_id} and its sub-routes. Another tenant's run is 404, never 403.
import { badRequest } from '../errors.ts';
import { requireScope } from '../http/auth.ts';
import path from 'node:path';
import { RUN_STATUSES, resultBody, runDir, statusBody, type RunStatus } from '../runs/records.ts';
import { lastEventId, streamRunEvents } from './sse.ts';
import { TRACE_FILE_CONTENT, answerTraceFile, answerTraceIndex } from './trace-files.ts';
import type { Ctx } from '../context.ts';
import { BINARY_BODY, pageLimit, param, queryOnce, sendFile, type RouteSpec } from './route.ts';

const runId = (ctx: Ctx): string => param(ctx, 'run_id');
/** Longest a read waits for the work its ended run left (the plane's close, the trace's write). */
const RUN_TAIL_WAIT_MS = 20_000;

/** Waits (boundedly) for an ended run's unfinished work, when there is some on this gateway. */
async function afterTail(work: Promise<void> | undefined): Promise<void> {
  if (work) await Promise.race([work, new Promise((r) => setTimeout(r, RUN_TAIL_WAIT_MS).unref())]);
}

/** A file the runner leaves in the run's directory, readable with scope result. */
function runFileRoute(routePath: string, summary: string, file: string, type: string, missing: string, o: { afterPlaneClose?: boolean; ok?: string } = {}): RouteSpec {
  return {
    method: 'GET',
    path: routePath,
    summary,
    ...(o.ok ? { ok: o.ok } : { content: { [type]: BINARY_BODY } }),
    tags: ['runs'],
    auth: true,
    scope: 'result',
    async handler(ctx, s) {
      const run = await s.runs.get(ctx.state.tenant!, runId(ctx));
      // an ended run's plane closes after its result is recorded: its video is written at the end of that close
      if (o.afterPlaneClose) await afterTail(s.planeClosing(run.run_id));
      await sendFile(ctx, path.join(runDir(s.config.dataDir, run), file), type, missing);
    },
  };
}

/** One query parameter given at most once, as a string (absent: undefined). */
/** The listing's query: status (one of the run statuses), limit 1..100 (default 20), cursor from a previous page. */
function listQuery(ctx: Ctx): { status?: RunStatus; limit: number; cursor?: string } {
  const status = queryOnce(ctx, 'status');
  if (status !== undefined && !RUN_STATUSES.includes(status as RunStatus)) throw badRequest(`status must be one of ${RUN_STATUSES.join(', ')}`, 'status');
  return { status: status as RunStatus | undefined, limit: pageLimit(ctx), cursor: queryOnce(ctx, 'cursor') };
}

export const runRoutes: RouteSpec[] = [
  {
    method: 'GET',
    path: '/v1/runs',
    ok: 'responses.schema.json#/$defs/RunList',
    summary: "The tenant's runs, newest first: ?status= filters, ?limit= (1-100, default 20) sizes the page, ?cursor= (next_cursor of the previous page) pages on",
    tags: ['runs'],
    auth: true,
    scope: 'status',
    async handler(ctx, s) {
      const page = await s.runs.list(ctx.state.tenant!, listQuery(ctx));
      ctx.body = { runs: page.items, next_cursor: page.next_cursor };
    },
  },
  {
    method: 'GET',
    path: '/v1/runs/:run_id',
    ok: 'responses.schema.json#/$defs/RunLifecycle',
    summary: 'Lifecycle of a run: status, phase, halt_class, failure_help',
    tags: ['runs'],
    auth: true,
    scope: 'status',
    async handler(ctx, s) {
      ctx.body = await s.runs.lifecycle(ctx.state.tenant!, runId(ctx));
    },
  },
  {
    method: 'GET',
    path: '/v1/runs/:run_id/status',
    ok: 'responses.schema.json#/$defs/RunStatusBody',
    summary: 'Status body of a run',
    tags: ['runs'],
    auth: true,
    scope: 'status',
    async handler(ctx, s) {
      ctx.body = await s.runs.status(ctx.state.tenant!, runId(ctx));
    },
  },
  {
    method: 'GET',
    path: '/v1/runs/:run_id/result',
    ok: 'responses.schema.json#/$defs/RunResult',
    summary: 'Result body of a run (a run may answer 200 with status failed)',
    tags: ['runs'],
    auth: true,
    scope: 'result',
    async handler(ctx, s) {
      ctx.body = resultBody(await s.runs.get(ctx.state.tenant!, runId(ctx)));
    },
  },
  {
    method: 'GET',
    path: '/v1/runs/:run_id/events',
    ok: 'responses.schema.json#/$defs/EventList',
    summary: 'Events of a run: JSON, or with ?sse=true a server-sent event stream (Last-Event-ID resumes)',
    tags: ['runs'],
    auth: true,
    scope: 'logs',
    // an EventSource cannot send headers: with ?sse=true a browser may use a ticket
    ticket: (ctx) => ctx.query.sse === 'true' || ctx.query.sse === '1',
    responses: { '204': 'SSE: the Last-Event-ID is the run.ended event; nothing more will come (EventSource stops reconnecting)' },
    async handler(ctx, s) {
      const run = await s.runs.get(ctx.state.tenant!, runId(ctx));
      const sse = ctx.query.sse === 'true' || ctx.query.sse === '1';
      if (sse) return streamRunEvents(ctx, s, run.run_id, run.tenant_id);
      ctx.body = { run_id: run.run_id, status: run.status, events: await s.runs.history(run.run_id, lastEventId(ctx)) };
    },
  },
  {
    method: 'GET',
    path: '/v1/runs/:run_id/trace',
    ok: 'responses.schema.json#/$defs/RunTrace',
    summary: "The run's trace: its manifest, where to read each bundle file, and its place on the ingest service; 404 until the bundle is written (the run ended)",
    tags: ['runs'],
    auth: true,
    scope: 'logs',
    async handler(ctx, s) {
      const run = await s.runs.get(ctx.state.tenant!, runId(ctx));
      // an ended run's bundle is written after its result is recorded
      await afterTail(s.traceClosing(run.run_id));
      await answerTraceIndex(ctx, s, run, `/v1/runs/${encodeURIComponent(run.run_id)}/trace`, 'no trace has been recorded for this run (yet)');
    },
  },
  {
    method: 'GET',
    path: '/v1/runs/:run_id/trace/*file',
    summary: "One file of the run's trace bundle (manifest.json, trace.json, steps/NNNN.json, events/*.jsonl, screenshots/NNNN_<kind>.png, ...)",
    tags: ['runs'],
    content: TRACE_FILE_CONTENT,
    auth: true,
    scope: 'logs',
    async handler(ctx, s) {
      const run = await s.runs.get(ctx.state.tenant!, runId(ctx));
      await afterTail(s.traceClosing(run.run_id));
      await answerTraceFile(ctx, s, run);
    },
  },
  runFileRoute('/v1/runs/:run_id/artifacts/extracted_rows.json', 'Extracted rows of a run; 404 while none exist', 'extracted_rows.json', 'application/json', 'this run has no extracted rows', { ok: 'responses.schema.json#/$defs/ExtractedRows' }),
  runFileRoute('/v1/runs/:run_id/artifacts/extracted_rows.meta.json', 'Metadata of the extracted rows (entity_name, extractions, extraction_quality); 404 while none exist', 'extracted_rows.meta.json', 'application/json', 'this run has no extracted rows', { ok: 'responses.schema.json#/$defs/ExtractedRowsMeta' }),
  runFileRoute('/v1/runs/:run_id/video', "The plane's screen recording of a run (WebM, VP8); 404 if none", 'video.webm', 'video/webm', 'this run has no video recording', { afterPlaneClose: true }),
  {
    method: 'POST',
    path: '/v1/runs/:run_id/cancel',
    ok: 'responses.schema.json#/$defs/RunStatusBody',
    summary: 'Cancel a run (our addition); its limits are released once',
    tags: ['runs'],
    auth: true,
    async handler(ctx, s) {
      requireScope(ctx, 'run');
      ctx.body = statusBody(await s.runs.cancel(ctx.state.tenant!, runId(ctx)));
    },
  },
];
