// Recovering a bundle that a process staged and never committed. A session
// writes its screenshots and model calls into a hidden staging directory beside
// its bundle while it runs, and its step records, trace.json and manifest at
// close, just before the rename that commits them (store.ts). A process killed
// before that rename leaves the staging directory and no bundle. This module
// finds such directories and commits what they hold, marked as recovered: the
// caller says the run's final status (the SDK never infers it) and may give the
// step records it kept itself. The directory is read as untrusted: only regular
// files with a bundle path of a known kind that parse are kept; a symbolic link
// is never followed (it is removed), nor is any other file.
import { constants } from 'node:fs';
import { lstat, mkdir, open, readdir, rm, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { CaptureMode, DecisionEvent, Manifest, RunStatus, StepRecord, TraceDocument } from '../schemas/trace/types.gen.ts';
import { TRACE_SCHEMA_FILES, bundleJson, checkRecord, jsonLine, traceSchemaBytes, traceSchemaVersions, type TraceRecordKind } from '../schemas/trace/index.ts';
import { rollupCosts, trajectoryFingerprint } from './costs.ts';
import { BundleContext, RulesEngine } from './diagnostics.ts';
import type { StepInput } from './session-options.ts';
import { STAGING_DIR_RE, atomicWriteFile, checkRelpath, commitStagedDir } from './store.ts';
import { SDK_VERSION, ValueError, newId, nowIso, pad4, safeId, sha256Hex } from './util.ts';
import { OBSERVATION_KINDS, isPng } from './validate.ts';

export interface RecoverStagedOptions {
  runId: string;
  /** the run's final status as the caller's own record says it (never inferred from the staged files) */
  status: RunStatus;
  /** why the bundle is recovered: the summary of a recovery decision event and manifest.recovery.reason */
  reason: string;
  clientName: string;
  clientVersion?: string | null;
  startedAt?: string;
  endedAt?: string | null;
  captureMode?: CaptureMode;
  tags?: Record<string, string>;
  /** the steps the caller recorded elsewhere; a staged step file that validates wins at its index (the session wrote it) */
  steps?: StepInput[];
}

export interface RecoverStagedResult {
  /** true when the staged directory already held a whole bundle with this status, committed as it was */
  reused: boolean;
  /** bundle paths committed (manifest.json aside) */
  kept: string[];
  /** what was in the staging directory and is not in the bundle, with why */
  dropped: string[];
}

/** The staging directories of the bundle at outDir that are real directories (a symbolic link of that name is not one). */
export async function stagedBundles(outDir: string): Promise<string[]> {
  const root = path.resolve(outDir);
  const parent = path.dirname(root);
  const names = await readdir(parent).catch(() => [] as string[]);
  const out: string[] = [];
  for (const name of names.sort()) {
    if (STAGING_DIR_RE.exec(name)?.[1] !== path.basename(root)) continue;
    if ((await lstat(path.join(parent, name)).catch(() => undefined))?.isDirectory()) out.push(path.join(parent, name));
  }
  return out;
}

type Kind = TraceRecordKind | 'png' | 'jsonl-events' | 'jsonl-reasoning' | 'array-outcome' | 'array-eval' | 'log' | 'json';

/** What a staged file may be; null: not a file a session stages, or one this module writes anew. */
function kindOf(rel: string): Kind | null {
  if (/^screenshots\/\d{4}_(pre|post|target|diff|intervention_before|intervention_after)\.png$/.test(rel)) return 'png';
  if (/^modelio\/(\d{4}|run)-[a-z][a-z0-9_]*-\d+\.json$/.test(rel)) return 'modelio';
  if (/^steps\/\d{4}\.json$/.test(rel) || /^steps\/\d{4}\/[0-9a-f]{8}\.json$/.test(rel) || /^replay\/\d{4}\.prior\.json$/.test(rel)) return 'step';
  if (rel === 'events/reasoning.jsonl') return 'jsonl-reasoning';
  if (/^events\/(\d{4}|run)\.jsonl$/.test(rel)) return 'jsonl-events';
  if (/^side_effects\/\d{4}-[A-Za-z0-9_-]+\.json$/.test(rel)) return 'side-effect';
  if (rel === 'outcomes.json') return 'array-outcome';
  if (rel === 'eval_candidates.json') return 'array-eval';
  if (/^logs\/[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}\.log$/.test(rel)) return 'log';
  if (/^preferences\/\d{4}\.json$/.test(rel)) return 'json';
  return null;
}

/** A PNG written whole: signature, IHDR, and the IEND chunk at its end (a write cut by a kill has none). */
const wholePng = (b: Buffer): boolean => isPng(b) && b.length >= 36 && b.subarray(b.length - 8, b.length - 4).toString('latin1') === 'IEND';

/** Why a staged file cannot go into the bundle as it is, or null. */
function unfit(kind: Kind, bytes: Buffer): string | null {
  if (kind === 'png') return wholePng(bytes) ? null : 'not a whole PNG image';
  if (kind === 'log') return null;
  try {
    const text = bytes.toString('utf8');
    if (kind === 'jsonl-events' || kind === 'jsonl-reasoning') {
      if (!text.endsWith('\n')) return 'its last line is cut';
      for (const line of text.split('\n').filter(Boolean)) {
        const msg = checkRecord(kind === 'jsonl-events' ? 'decision-event' : 'reasoning', JSON.parse(line));
        if (msg) return msg;
      }
      return null;
    }
    const value = JSON.parse(text) as unknown;
    if (kind === 'json') return value && typeof value === 'object' ? null : 'not a JSON object';
    if (kind === 'array-outcome' || kind === 'array-eval') {
      if (!Array.isArray(value)) return 'not a JSON array';
      return value.map((v) => checkRecord(kind === 'array-outcome' ? 'outcome' : 'eval-candidate', v)).find(Boolean) ?? null;
    }
    return checkRecord(kind, value);
  } catch (err) {
    return `not valid JSON: ${(err as Error).message}`;
  }
}

/** Reads a regular file without following a link in its last component. */
async function readNoFollow(file: string): Promise<Buffer> {
  const fh = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    return await fh.readFile();
  } finally {
    await fh.close();
  }
}

/** Every entry below dir by bundle path, without following links: regular files, and the rest (links, sockets, ...) to remove. */
async function walk(dir: string, rel = '', files = new Map<string, string>(), other: string[] = []): Promise<{ files: Map<string, string>; other: string[] }> {
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, e.name);
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) await walk(full, r, files, other);
    else if (e.isFile()) files.set(r, full);
    else other.push(r);
  }
  return { files, other };
}

/**
 * Commits the staging directory `staged` (one stagedBundles(outDir) found) onto
 * outDir. A staged manifest whose status is opts.status and whose every listed
 * file is there with its signature is a whole bundle: it is committed as it is.
 * Otherwise the bundle is rebuilt in place from what is fit to keep: the step
 * records (staged ones that validate, else the caller's, with the staged
 * screenshots and model calls of their index), a recovery decision event,
 * trace.json, findings, the schemas, and a manifest with opts.status and a
 * `recovery` entry; the manifest is written last, then the directory is renamed.
 * Safe to run again after a kill at any point: an interrupted rebuild has no
 * manifest that passes the check, so the next call rebuilds it.
 */
export async function recoverStagedBundle(staged: string, outDir: string, opts: RecoverStagedOptions): Promise<RecoverStagedResult> {
  const runId = safeId('runId', opts.runId);
  const root = path.resolve(outDir);
  const dir = path.resolve(staged);
  if (path.dirname(dir) !== path.dirname(root) || STAGING_DIR_RE.exec(path.basename(dir))?.[1] !== path.basename(root)) {
    throw new ValueError(`${staged} is not a staging directory of ${outDir}`);
  }
  if (!(await lstat(dir)).isDirectory()) throw new ValueError(`${staged} is not a directory`);
  const { files, other } = await walk(dir);
  const dropped: string[] = [];
  for (const r of other) {
    await unlink(path.join(dir, ...r.split('/')));
    dropped.push(`${r}: not a regular file (removed, never followed)`);
  }

  const manifest = await readNoFollow(path.join(dir, 'manifest.json'))
    .then((b) => JSON.parse(b.toString('utf8')) as Manifest)
    .catch(() => undefined);
  if (manifest && !dropped.length && (await wholeBundle(manifest, files, opts.status))) {
    await commitStagedDir(dir, root);
    return { reused: true, kept: manifest.paths ?? [], dropped };
  }
  await rm(path.join(dir, 'manifest.json'), { recursive: true, force: true });

  // what is fit to keep, by bundle path; the files this rebuild writes are set aside
  const keep = new Map<string, Buffer>();
  const stagedSteps = new Map<number, StepRecord>();
  for (const [rel, full] of files) {
    let why: string | null = null;
    let bytes: Buffer | undefined;
    const kind = (() => {
      try {
        return checkRelpath(rel) === rel ? kindOf(rel) : null;
      } catch {
        return null;
      }
    })();
    if (rel === 'manifest.json' || rel === 'trace.json' || rel === 'diagnostics/findings.json' || rel.startsWith('schema/')) why = null;
    else if (kind === null) why = 'not a file a session stages';
    else {
      bytes = await readNoFollow(full).catch(() => undefined);
      why = bytes === undefined ? 'unreadable' : unfit(kind, bytes);
    }
    const m = bytes && !why ? /^steps\/(\d{4})\.json$/.exec(rel) : null;
    const step = m ? (JSON.parse(bytes!.toString('utf8')) as StepRecord) : undefined;
    if (step && step.step_index !== Number(m![1])) why = `holds step ${step.step_index}`;
    if (bytes && !why) {
      keep.set(rel, bytes);
      if (step) stagedSteps.set(step.step_index, step);
      continue;
    }
    await rm(full, { recursive: true, force: true });
    if (why) dropped.push(`${rel}: ${why}`);
  }

  const captureMode = opts.captureMode ?? 'screenshots';
  const steps = new Map<number, StepRecord>(stagedSteps);
  for (const input of opts.steps ?? []) {
    if (steps.has(input.step_index)) continue;
    const s = { ...structuredClone(input), step_id: input.step_id ?? newId('step_'), capture_mode: input.capture_mode ?? captureMode } as StepRecord;
    const at = pad4(s.step_index);
    for (const kind of OBSERVATION_KINDS) if (keep.has(`screenshots/${at}_${kind}.png`)) s.observation = { ...(s.observation ?? {}), [kind]: `screenshots/${at}_${kind}.png` };
    const calls = [...keep.keys()].filter((r) => r.startsWith(`modelio/${at}-`)).sort();
    if (calls.length) s.modelio = calls;
    const msg = checkRecord('step', s);
    if (msg) throw new ValueError(`invalid step ${s.step_index}: ${msg}`);
    steps.set(s.step_index, s);
  }
  for (const [idx, s] of steps) keep.set(`steps/${pad4(idx)}.json`, Buffer.from(bundleJson(s)));
  const ordered = [...steps.values()].sort((a, b) => a.step_index - b.step_index);

  const event: DecisionEvent = { event_id: newId('evt_'), ts: nowIso(), step_index: null, layer: 'recovery', kind: 'note', summary: opts.reason.slice(0, 1000), payload: { recovered_from: path.basename(dir), status: opts.status, dropped: dropped.length } };
  keep.set('events/run.jsonl', Buffer.concat([keep.get('events/run.jsonl') ?? Buffer.alloc(0), Buffer.from(jsonLine(event))]));
  if (!keep.has('outcomes.json')) keep.set('outcomes.json', Buffer.from(bundleJson([])));
  if (!keep.has('eval_candidates.json')) keep.set('eval_candidates.json', Buffer.from(bundleJson([])));

  const debugSessionId = newId('dbg_');
  const startedAt = opts.startedAt ?? nowIso();
  const costs = rollupCosts(ordered, {});
  const trace: TraceDocument = {
    schema_version: traceSchemaVersions().trace,
    session: {
      schema_version: traceSchemaVersions().session,
      run_id: runId,
      debug_session_id: debugSessionId,
      client_name: opts.clientName,
      client_version: opts.clientVersion ?? null,
      status: opts.status,
      capture_mode: captureMode,
      tags: { ...(opts.tags ?? {}) },
      started_at: startedAt,
      ended_at: opts.endedAt ?? null,
      costs,
    },
    steps: ordered,
  };
  const traceMsg = checkRecord('trace', trace);
  if (traceMsg) throw new ValueError(`invalid trace: ${traceMsg}`);
  keep.set('trace.json', Buffer.from(bundleJson(trace)));
  const findings = await new RulesEngine().evaluate(new BundleContext(trace, null, null));
  keep.set('diagnostics/findings.json', Buffer.from(bundleJson(findings)));
  for (const f of TRACE_SCHEMA_FILES) keep.set(`schema/${f}`, traceSchemaBytes(f));

  for (const [rel, bytes] of keep) {
    const file = path.join(dir, ...rel.split('/'));
    await mkdir(path.dirname(file), { recursive: true });
    await atomicWriteFile(file, bytes);
  }
  const paths = [...keep.keys()].sort();
  const m: Manifest & { recovery: Record<string, unknown> } = {
    schema_version: traceSchemaVersions().manifest,
    bundle_format: 'runplane-trace-bundle/1',
    run_id: runId,
    debug_session_id: debugSessionId,
    client_name: opts.clientName,
    client_version: opts.clientVersion ?? null,
    client_git_sha: null,
    sdk_version: SDK_VERSION,
    status: opts.status,
    started_at: startedAt,
    ended_at: opts.endedAt ?? null,
    capture_mode: captureMode,
    tags: { ...(opts.tags ?? {}) },
    step_count: ordered.length,
    costs,
    trajectory_fingerprint: trajectoryFingerprint(ordered),
    schema_versions: traceSchemaVersions(),
    paths,
    signatures: Object.fromEntries(paths.map((p) => [p, sha256Hex(keep.get(p)!)])),
    // our addition: this bundle was not closed by its session; what it holds is what was staged before the process died
    recovery: { recovered_at: nowIso(), reason: opts.reason.slice(0, 1000), from: path.basename(dir), complete: false, dropped },
  };
  const msg = checkRecord('manifest', m);
  if (msg) throw new ValueError(`invalid manifest: ${msg}`);
  await atomicWriteFile(path.join(dir, 'manifest.json'), bundleJson(m));
  await commitStagedDir(dir, root);
  return { reused: false, kept: paths, dropped };
}

/** A staged manifest with this status whose every listed file is staged with its signature. */
async function wholeBundle(m: Manifest, files: Map<string, string>, status: RunStatus): Promise<boolean> {
  if (m.status !== status || !Array.isArray(m.paths) || !m.signatures || checkRecord('manifest', m)) return false;
  for (const p of m.paths) {
    const full = files.get(p);
    const bytes = full ? await readNoFollow(full).catch(() => undefined) : undefined;
    if (!bytes || sha256Hex(bytes) !== m.signatures[p]) return false;
  }
  return true;
}
