// /v1/runs/{run_id} and its sub-routes. Another tenant's run is 404, never 403.
import { notFound } from '../errors.ts';
import { requireScope } from '../http/auth.ts';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { lifecycleBody, resultBody, runDir, statusBody } from '../runs/records.ts';
import { lastEventId, streamRunEvents } from './sse.ts';
import type { Ctx } from '../context.ts';
import { param, type RouteSpec } from './route.ts';

const runId = (ctx: Ctx): string => param(ctx, 'run_id');

/** A sub-resource the runner produces: the run must be the tenant's, and until the artefact exists it is 404. */
function artefactRoute(path: string, summary: string, scope: 'logs' | 'result', missing: string): RouteSpec {
  return {
    method: 'GET',
    path,
    summary,
    tags: ['runs'],
    auth: true,
    scope,
    async handler(ctx, s) {
      await s.runs.get(ctx.state.tenant!, runId(ctx));
      throw notFound(missing);
    },
  };
}

export const runRoutes: RouteSpec[] = [
  {
    method: 'GET',
    path: '/v1/runs/:run_id',
    summary: 'Lifecycle of a run: status, phase, halt_class, failure_help',
    tags: ['runs'],
    auth: true,
    scope: 'status',
    async handler(ctx, s) {
      ctx.body = lifecycleBody(await s.runs.get(ctx.state.tenant!, runId(ctx)));
    },
  },
  {
    method: 'GET',
    path: '/v1/runs/:run_id/status',
    summary: 'Status body of a run',
    tags: ['runs'],
    auth: true,
    scope: 'status',
    async handler(ctx, s) {
      ctx.body = statusBody(await s.runs.get(ctx.state.tenant!, runId(ctx)));
    },
  },
  {
    method: 'GET',
    path: '/v1/runs/:run_id/result',
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
    summary: 'Events of a run: JSON, or with ?sse=true a server-sent event stream (Last-Event-ID resumes)',
    tags: ['runs'],
    auth: true,
    scope: 'logs',
    async handler(ctx, s) {
      const run = await s.runs.get(ctx.state.tenant!, runId(ctx));
      const sse = ctx.query.sse === 'true' || ctx.query.sse === '1';
      if (sse) return streamRunEvents(ctx, s, run.run_id, run.tenant_id);
      ctx.body = { run_id: run.run_id, status: run.status, events: await s.runs.history(run.run_id, lastEventId(ctx)) };
    },
  },
  artefactRoute('/v1/runs/:run_id/trace', "Link to the run's captured trace; 404 while none is recorded", 'logs', 'no trace has been recorded for this run'),
  {
    method: 'GET',
    path: '/v1/runs/:run_id/artifacts/extracted_rows.json',
    summary: 'Extracted rows of a run; 404 while none exist',
    tags: ['runs'],
    auth: true,
    scope: 'result',
    async handler(ctx, s) {
      const run = await s.runs.get(ctx.state.tenant!, runId(ctx));
      const file = path.join(runDir(s.config.dataDir, run), 'extracted_rows.json');
      const text = await readFile(file, 'utf8').catch(() => undefined);
      if (text === undefined) throw notFound('this run has no extracted rows');
      ctx.type = 'application/json';
      ctx.body = text;
    },
  },
  artefactRoute('/v1/runs/:run_id/video', 'Screen recording of a run; 404 if none', 'result', 'this run has no video recording'),
  {
    method: 'POST',
    path: '/v1/runs/:run_id/cancel',
    summary: 'Cancel a run (our addition); its limits are released once',
    tags: ['runs'],
    auth: true,
    async handler(ctx, s) {
      requireScope(ctx, 'run');
      ctx.body = statusBody(await s.runs.cancel(ctx.state.tenant!, runId(ctx)));
    },
  },
];
