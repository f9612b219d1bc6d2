// Reconciliation at the next start: what a session's close could not deliver
// (the ingest down or throttled past the flush deadline) stays in its bundle's
// drop ledger (diagnostics/stream_drops.json) with the record itself: the JSON
// body, or a copy of the screenshot beside the ledger. A later process sends
// those records, through the same streamer and its rules, and marks each one
// recovered as the ingest takes it; the copies go once delivered. The ledger
// is the client's own file, but it is still read as untrusted: a record may
// only go to its own run's routes.
import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { FileStore, writeBytes } from './store.ts';
import { Streamer, isFinalDrop } from './stream.ts';
import type { DroppedRecord, StreamKind } from './stream-types.ts';
import { bundleJson } from '../schemas/trace/index.ts';
import { nowIso, type SdkLogger } from './util.ts';

export const LEDGER_FILE = 'diagnostics/stream_drops.json';

const KINDS: ReadonlySet<StreamKind> = new Set(['manifest', 'trace', 'step', 'costs', 'events', 'screenshot', 'modelio', 'logs', 'judge_decision', 'reasoning', 'side_effect', 'outcome', 'eval_candidate', 'findings', 'preference']);
const IMAGE_FILE = /^diagnostics\/stream_drops\/\d{4,9}\.png$/;
const MAX_RECORDS = 100_000;

export interface ReconcileOptions {
  dsn: string;
  logger?: SdkLogger;
  /** how long the upload may take (default 30 s); what is left stays in the ledger */
  deadlineMs?: number;
  fetch?: typeof fetch;
}

export interface ReconcileResult {
  run_id: string | null;
  /** records the ledger still held before this call */
  pending: number;
  recovered: number;
  /** still not delivered (the ingest down again, or refused) */
  left: number;
  /** records not sent because the ledger entry is not one this SDK writes (why, per entry) */
  refused: string[];
}

const silent: SdkLogger = { debug() {}, warn() {} };

/** Why a ledger entry cannot be sent as it is, or null. */
function refusal(e: DroppedRecord, runPath: string): string | null {
  if (!KINDS.has(e.kind)) return `kind ${JSON.stringify(e.kind).slice(0, 40)} is not a record kind`;
  if (e.method !== 'POST' && e.method !== 'PUT') return 'method is not POST or PUT';
  const pathOk = typeof e.path === 'string' && e.path.length <= 2048 && (e.kind === 'manifest' ? e.path === '/runs' : e.path.startsWith(`${runPath}/`)) && !/(^|\/)\.\.?(\/|$)|[\\%?#\s]/.test(e.path.slice(runPath.length));
  if (!pathOk) return `path ${JSON.stringify(String(e.path)).slice(0, 80)} is not a route of this run`;
  if (e.image_file !== undefined) return typeof e.image_file === 'string' && IMAGE_FILE.test(e.image_file) ? null : 'image_file is not a copy beside the ledger';
  return e.body === undefined ? 'the entry has no record (written by an SDK that did not keep them)' : null;
}

/**
 * Sends what a bundle's drop ledger lists as not delivered, then rewrites the
 * ledger: delivered entries are marked recovered (with recovered_at) and lose
 * their copy. A bundle without a ledger, or with nothing pending, is left as it is.
 */
export async function reconcileBundle(dir: string, opts: ReconcileOptions): Promise<ReconcileResult> {
  const log = opts.logger ?? silent;
  const store = new FileStore(dir);
  const result: ReconcileResult = { run_id: null, pending: 0, recovered: 0, left: 0, refused: [] };
  if (!(await store.exists(LEDGER_FILE))) return result;
  let ledger: { run_id?: unknown; records?: unknown };
  try {
    ledger = JSON.parse(await store.readText(LEDGER_FILE)) as typeof ledger;
  } catch (err) {
    throw new Error(`${LEDGER_FILE} is not JSON: ${(err as Error).message}`);
  }
  if (typeof ledger.run_id !== 'string' || !ledger.run_id || ledger.run_id.length > 256 || !Array.isArray(ledger.records) || ledger.records.length > MAX_RECORDS) {
    throw new Error(`${LEDGER_FILE} is not a drop ledger (run_id and records)`);
  }
  const runId = ledger.run_id;
  result.run_id = runId;
  const records = ledger.records as DroppedRecord[];
  // a record the ingest refused with 429 twice was dropped for good (the spec's client), never re-sent
  const pending = records.filter((e) => e && typeof e === 'object' && e.recovered !== true && !isFinalDrop(e));
  result.pending = pending.length;
  if (!pending.length) return result;

  const runPath = `/runs/${encodeURIComponent(runId)}`;
  const streamer = new Streamer({ dsn: opts.dsn, logger: log, clientId: randomUUID(), clientName: 'runplane-trace-reconcile', fetch: opts.fetch });
  const delivered = new Set<DroppedRecord>();
  for (const e of pending) {
    const why = refusal(e, runPath);
    if (why) {
      result.refused.push(`${e.method} ${String(e.path).slice(0, 80)}: ${why}`);
      continue;
    }
    const image = e.image_file ? await store.readBytes(e.image_file).catch(() => undefined) : undefined;
    if (e.image_file && !image) {
      result.refused.push(`${e.method} ${e.path}: ${e.image_file} is missing`);
      continue;
    }
    streamer.enqueue({ kind: e.kind, method: e.method, path: e.path, ...(image ? { image } : { body: e.body }), onSent: () => delivered.add(e) });
  }
  await streamer.close(opts.deadlineMs ?? 30_000);

  const at = nowIso();
  const gone: string[] = [];
  for (const e of delivered) {
    e.recovered = true;
    e.recovered_at = at;
    delete e.body;
    if (e.image_file) gone.push(e.image_file);
    delete e.image_file;
  }
  result.recovered = delivered.size;
  result.left = pending.length - delivered.size;
  await writeBytes(store, LEDGER_FILE, bundleJson({ ...ledger, records }));
  // the copies go after the ledger stops naming them: a crash in between leaves only a stray file
  for (const f of gone) await rm(path.join(dir, f), { force: true });
  if (result.left) log.warn(`trace reconcile: ${result.left} records of run ${runId} still not delivered; they stay in ${LEDGER_FILE}`);
  return result;
}
