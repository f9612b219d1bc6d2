// What the model saw and said: model calls (modelio/), reasoning, and the
// run's and steps' logs.
import type { ModelIoRecord, ReasoningRecord } from '../schemas/trace/types.gen.ts';
import { bundleJson, jsonLine } from '../schemas/trace/index.ts';
import type { SessionCore } from './session-core.ts';
import { ValueError, canonicalJson, nowIso, pad4, sha256Hex } from './util.ts';

export const LOG_FILE_LIMIT = 1024 * 1024;

export interface LogOptions { stepIndex?: number | null; name?: string }
export interface ReasoningOptions { tokens?: number | null; format?: ReasoningRecord['format']; model?: string | null; ts?: string }
export interface ModelioOptions { stepIndex?: number | null; layer?: string; validate?: boolean }

export function appendLog(core: SessionCore, text: string, opts: LogOptions = {}): void {
  const name = opts.stepIndex !== undefined && opts.stepIndex !== null ? `step-${opts.stepIndex}` : (opts.name ?? 'run');
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(name) || name.startsWith('.')) throw new ValueError(`appendLog: invalid log name ${JSON.stringify(name)}`);
  const file = core.logs.get(name) ?? { text: '', bytes: 0, truncated: false };
  const size = Buffer.byteLength(text);
  if (file.bytes + size > LOG_FILE_LIMIT) {
    if (!file.truncated) core.log.warn(`log ${name} reached ${LOG_FILE_LIMIT} bytes; further lines are dropped`);
    file.truncated = true;
  } else {
    file.text += text;
    file.bytes += size;
  }
  core.logs.set(name, file);
  const body: Record<string, unknown> = { text };
  if (opts.stepIndex !== undefined && opts.stepIndex !== null) body.step_index = opts.stepIndex;
  else body.name = name;
  core.post({ kind: 'logs', method: 'POST', path: `${core.runPath}/logs`, body });
}

export function recordReasoning(core: SessionCore, stepIndex: number | null, text: string, opts: ReasoningOptions = {}): ReasoningRecord {
  const r: ReasoningRecord = {
    step_index: stepIndex,
    text: core.id.redaction.applyReasoning(text),
    tokens: opts.tokens ?? null,
    format: opts.format ?? 'adapter_inferred',
    model: opts.model ?? null,
    ts: opts.ts ?? nowIso(),
  };
  core.checkOrThrow('reasoning', r);
  core.reasoning.push(jsonLine(r));
  core.post({ kind: 'reasoning', method: 'POST', path: `${core.runPath}/reasoning`, body: r });
  return r;
}

export async function recordModelio(core: SessionCore, record: ModelIoRecord | Record<string, unknown>, opts: ModelioOptions = {}): Promise<string> {
  core.assertOpen();
  const rec = structuredClone(record) as ModelIoRecord;
  const layer = opts.layer ?? rec.layer;
  if (typeof layer !== 'string' || !/^[a-z][a-z0-9_]{0,31}$/.test(layer)) throw new ValueError('recordModelio: layer is required, 1-32 of a-z 0-9 _ starting with a letter (it names modelio/<step>-<layer>-<seq>.json), whether or not the record is validated');
  rec.layer = layer;
  const stepIndex = opts.stepIndex ?? (typeof rec.step_index === 'number' ? rec.step_index : null);
  rec.step_index = stepIndex;
  rec.response ??= {};
  if (core.id.captureLogprobs && rec.response.logprobs === undefined) rec.response.logprobs = [];
  rec.prompt_hash ??= sha256Hex(canonicalJson(rec.request ?? null));
  const existing = core.modelioByHash.get(rec.prompt_hash);
  if (existing) return existing;
  const redacted = core.id.redaction.apply(rec);
  redacted.prompt_hash = rec.prompt_hash;
  redacted.redaction_applied = core.id.redaction.id;
  redacted.recorded_at ??= nowIso();
  if (opts.validate ?? true) core.checkOrThrow('modelio', redacted);
  const stepKey = stepIndex === null ? 'run' : pad4(stepIndex);
  const seqKey = `${stepKey}-${layer}`;
  const seq = core.modelioSeq.get(seqKey) ?? 0;
  core.modelioSeq.set(seqKey, seq + 1);
  const name = `${stepKey}-${layer}-${seq}.json`;
  const rel = `modelio/${name}`;
  core.modelioByHash.set(rec.prompt_hash, rel);
  core.track(core.putFile(rel, bundleJson(redacted))).catch(() => undefined);
  if (stepIndex !== null) {
    const model = typeof redacted.request?.model === 'string' ? redacted.request.model : undefined;
    core.patchStep(stepIndex, (s) => {
      s.captured_versions = { ...(s.captured_versions ?? {}), ...(model ? { model } : {}), prompt_hash: rec.prompt_hash! };
      s.modelio = [...(s.modelio ?? []), rel];
    });
  }
  core.post({ kind: 'modelio', method: 'POST', path: `${core.runPath}/modelio/${name}`, body: redacted });
  return rel;
}
