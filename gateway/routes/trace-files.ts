// A trace bundle on this gateway's disk, read back over HTTP: the index (manifest
// and file URLs) and one file. Runs (/v1/runs/{id}/trace) and browser sessions
// (/v1/sessions/{id}/trace) are recorded the same way, so they are read the same way.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { notFound } from '../errors.ts';
import type { Ctx } from '../context.ts';
import type { Services } from '../services.ts';
import { traceDir } from '../trace/trace-fields.ts';
import { checkRelpath } from '../../sdk/store.ts';
import { BINARY_BODY, TEXT_BODY, sendFile, type RouteSpec } from './route.ts';

const BUNDLE_TYPES: Record<string, string> = { '.json': 'application/json', '.jsonl': 'application/x-ndjson', '.png': 'image/png', '.log': 'text/plain; charset=utf-8' };

/** The bundle file route's answers: one entry per type of BUNDLE_TYPES, and the fallback. */
export const TRACE_FILE_CONTENT: NonNullable<RouteSpec['content']> = {
  'application/json': { type: 'object', description: 'manifest.json, trace.json, steps/NNNN.json: the trace bundle schemas (schemas/trace)' },
  'application/x-ndjson': { ...TEXT_BODY, description: 'events/*.jsonl: one JSON record a line' },
  'image/png': BINARY_BODY,
  'text/plain': TEXT_BODY,
  'application/octet-stream': BINARY_BODY,
};

type Subject = { tenant_id: string; run_id: string };

/** The trace's index: its manifest, a URL per bundle file under `base`, and its place on the ingest. */
export async function answerTraceIndex(ctx: Ctx, s: Services, subject: Subject, base: string, missing: string): Promise<void> {
  const text = await readFile(path.join(traceDir(s.config.dataDir, subject), 'manifest.json'), 'utf8').catch(() => undefined);
  if (text === undefined) throw notFound(missing);
  const manifest = JSON.parse(text) as { paths?: string[] };
  ctx.body = {
    run_id: subject.run_id,
    manifest,
    files: ['manifest.json', ...(manifest.paths ?? [])].map((p) => ({ path: p, url: `${base}/${p}` })),
    ingest: s.traceLinks(subject.run_id),
  };
}

/** One file of the bundle, named by the route's *file parameter; anything that leaves the bundle is 404. */
export async function answerTraceFile(ctx: Ctx, s: Services, subject: Subject): Promise<void> {
  const raw = (ctx as unknown as { params: { file?: string | string[] } }).params.file;
  const rel = Array.isArray(raw) ? raw.join('/') : String(raw ?? '');
  let safe: string;
  try {
    safe = checkRelpath(rel);
  } catch {
    throw notFound('no such file in this trace');
  }
  await sendFile(ctx, path.join(traceDir(s.config.dataDir, subject), safe), BUNDLE_TYPES[path.extname(safe)] ?? 'application/octet-stream', 'no such file in this trace');
}
