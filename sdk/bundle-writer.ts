// Closing a session: settle the steps, write every bundle file with its
// signature, then the manifest last (a bundle without one is not committed),
// and send the final records when streaming.
import type { Manifest, RunStatus, TraceDocument } from '../schemas/trace/types.gen.ts';
import { TRACE_SCHEMA_FILES, bundleJson, traceSchemaBytes, traceSchemaVersions } from '../schemas/trace/index.ts';
import { rollupCosts, trajectoryFingerprint } from './costs.ts';
import { BundleContext, RulesEngine } from './diagnostics.ts';
import type { SessionCore } from './session-core.ts';
import { writeBytes } from './store.ts';
import { SDK_VERSION, nowIso, pad4, shortId } from './util.ts';
import { inferredVerdictStatus } from './verdicts.ts';

export function buildManifest(core: SessionCore, trajectory: string | null): Manifest {
  const m: Manifest = {
    schema_version: traceSchemaVersions().manifest,
    bundle_format: 'runplane-trace-bundle/1',
    run_id: core.id.runId,
    debug_session_id: core.id.debugSessionId,
    client_name: core.id.clientName,
    client_version: core.session.client_version ?? null,
    client_git_sha: core.session.client_git_sha ?? null,
    sdk_version: SDK_VERSION,
    status: core.status,
    started_at: core.session.started_at,
    ended_at: core.session.ended_at ?? null,
    capture_mode: core.captureMode,
    tags: { ...(core.session.tags ?? {}) },
    step_count: core.steps.size,
    costs: rollupCosts(core.steps.values(), core.costs),
    trajectory_fingerprint: trajectory,
    schema_versions: traceSchemaVersions(),
    redaction_policy: core.id.redaction.id,
    group_id: core.session.group_id ?? null,
    task_spec_id: core.session.task_spec_id ?? null,
  };
  if (core.session.branch_context) m.branch_context = structuredClone(core.session.branch_context);
  if (core.orchestrator) m.session_type = 'orchestrator';
  return m;
}

export function traceDocument(core: SessionCore): TraceDocument {
  const steps = [...core.steps.values()].sort((a, b) => a.step_index - b.step_index);
  return {
    schema_version: traceSchemaVersions().trace,
    session: { ...structuredClone(core.session), schema_version: traceSchemaVersions().session, status: core.status, capture_mode: core.captureMode, costs: rollupCosts(steps, core.costs) },
    steps,
  };
}

/** Writes the bundle and returns its manifest; close() calls it once. */
export async function writeBundle(core: SessionCore, status: RunStatus | null): Promise<Manifest> {
  if (status) core.setStatus(status);
  else if (core.status === 'running') core.setStatus('passed');
  core.session.ended_at = nowIso();
  if (core.heartbeatTimer) clearInterval(core.heartbeatTimer);
  core.interventionStop?.abort();
  await core.intervention?.catch(() => undefined);
  // steps whose patches never met a record_step are dropped with a warning
  for (const idx of core.pendingStepPatches.keys()) core.log.warn(`step ${idx} got observations or model-io but was never recorded`);
  for (const s of core.steps.values()) {
    if (!s.verdict && s.status && s.status !== 'pending' && s.status !== 'running') {
      s.verdict = { status: inferredVerdictStatus(s) };
      s.verdict_source = 'inferred';
    }
    if ((s.group_id === undefined || s.group_id === null) && core.session.group_id) s.group_id = core.session.group_id;
    if (core.streamer && core.sentSteps.get(`step:${s.step_index}:${s.step_id}`) !== bundleJson(s)) core.streamStep(s);
  }
  while (core.writes.length) await Promise.all(core.writes.splice(0));
  const staged = await core.stagedStore();
  try {
    const trace = traceDocument(core);
    const files: Array<[string, string | Uint8Array]> = [];
    for (const s of trace.steps) {
      files.push([`steps/${pad4(s.step_index)}.json`, bundleJson(s)]);
      for (const it of core.iterations.get(s.step_index) ?? []) files.push([`steps/${pad4(s.step_index)}/${shortId(it.step_id)}.json`, bundleJson(it)]);
    }
    for (const [file, lines] of core.events) files.push([`events/${file}.jsonl`, lines.join('')]);
    if (core.reasoning.length) files.push(['events/reasoning.jsonl', core.reasoning.join('')]);
    for (const se of core.sideEffects.values()) files.push([`side_effects/${pad4(se.step_index)}-${se.side_effect_id}.json`, bundleJson(se)]);
    files.push(['eval_candidates.json', bundleJson([...core.evalCandidates.values()].sort((a, b) => a.step_index - b.step_index))]);
    files.push(['outcomes.json', bundleJson(core.outcomes)]);
    for (const [idx, p] of core.preferences) files.push([`preferences/${pad4(idx)}.json`, bundleJson(p)]);
    for (const [idx, p] of core.replayPriors) files.push([`replay/${pad4(idx)}.prior.json`, bundleJson(p)]);
    for (const [name, log] of core.logs) files.push([`logs/${name}.log`, log.text]);
    const engine = await RulesEngine.fromPacks(core.rulePacks).catch((err: Error) => {
      core.log.warn(`rule packs failed to load (${err.message}); using the built-in rules`);
      return new RulesEngine();
    });
    const findings = await engine.evaluate(new BundleContext(trace, null, null));
    const findingsText = bundleJson(findings);
    files.push(['diagnostics/findings.json', findingsText]);
    for (const f of TRACE_SCHEMA_FILES) files.push([`schema/${f}`, traceSchemaBytes(f)]);
    const traceText = bundleJson(trace);
    files.push(['trace.json', traceText]);
    // independent files: written a few at a time, the close path being bound by
    // file-system latency rather than CPU (one at a time was most of close)
    await inParallel(files, 16, ([rel, data]) => core.putFile(rel, data));
    const manifest = buildManifest(core, trajectoryFingerprint(trace.steps));
    manifest.paths = [...core.signatures.keys()].sort();
    manifest.signatures = Object.fromEntries(manifest.paths.map((p) => [p, core.signatures.get(p)!]));
    await writeBytes(staged.store, 'manifest.json', bundleJson(manifest));
    await staged.commit();
    core.manifest = manifest;
    if (core.streamer) {
      core.post({ kind: 'trace', method: 'PUT', path: `${core.runPath}/trace`, key: 'trace', body: trace });
      core.post({ kind: 'findings', method: 'PUT', path: `${core.runPath}/findings`, key: 'findings', body: findings });
      for (const [name, log] of core.logs) if (log.truncated) core.log.debug(`log ${name} was truncated locally`);
      core.post({ kind: 'manifest', method: 'POST', path: '/runs', key: 'manifest', body: manifest });
      // the upload finishes on its own; close() waits for it unless asked not to
      const streamer = core.streamer;
      core.uploading = streamer.close(core.streamOpts.flushTimeoutMs ?? 5000).then(() => writeDropLedger(core));
    }
    return manifest;
  } catch (err) {
    await staged.discard().catch(() => undefined);
    await core.streamer?.close(0);
    throw err;
  }
}

/** Runs fn over items with at most `width` calls in flight; rejects with the first failure once all settled. */
async function inParallel<T>(items: T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: unknown = null;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++]!;
      await fn(item).catch((err: unknown) => (failure ??= err));
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  if (failure) throw failure;
}

/**
 * The drop ledger goes beside the committed bundle once the upload is over
 * (diagnostics/stream_drops.json, outside the manifest: the bundle was sealed
 * before the last records went out), only when something was dropped.
 */
async function writeDropLedger(core: SessionCore): Promise<void> {
  const ledger = core.streamer?.ledger ?? [];
  if (!ledger.length) return;
  // what is still not delivered keeps its record, so a later start can send it (reconcileBundle)
  const at = new Map(ledger.map((e, i) => [e, i]));
  for (const { entry, body, image } of core.streamer!.unsent()) {
    if (!image) {
      entry.body = body;
      continue;
    }
    const file = `diagnostics/stream_drops/${pad4(at.get(entry)!)}.png`;
    await writeBytes(core.id.store, file, image).then(
      () => (entry.image_file = file),
      (err: Error) => core.log.warn(`a dropped screenshot could not be kept for a later upload: ${err.message}`),
    );
  }
  await writeBytes(core.id.store, 'diagnostics/stream_drops.json', bundleJson({ run_id: core.id.runId, records: ledger })).catch((err: Error) =>
    core.log.warn(`the stream drop ledger could not be written: ${err.message}`),
  );
}
