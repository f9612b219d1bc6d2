// What a step carries besides its record: captured versions, the environment
// fingerprint, subgoal progress, loop detection and preferences.
import type { CapturedVersions, EnvFingerprint, SubgoalCompletion } from '../schemas/trace/types.gen.ts';
import type { SessionCore } from './session-core.ts';
import { clamp01, nowIso } from './util.ts';

export function setStepVersions(core: SessionCore, stepIndex: number, versions: Partial<CapturedVersions>): CapturedVersions {
  const s = core.step(stepIndex, 'setStepVersions');
  const merged = { ...(s.captured_versions ?? {}), ...versions };
  core.checkOrThrow('step', { ...s, captured_versions: merged });
  s.captured_versions = merged;
  core.touched(s);
  return merged;
}

export function attachEnvFingerprint(core: SessionCore, stepIndex: number, fp: EnvFingerprint): EnvFingerprint {
  const s = core.step(stepIndex, 'attachEnvFingerprint');
  core.checkOrThrow('step', { ...s, env_fingerprint: fp });
  s.env_fingerprint = structuredClone(fp);
  core.touched(s);
  return s.env_fingerprint;
}

export function recordSubgoalCompletion(core: SessionCore, stepIndex: number, subgoalId: string, completion: number): SubgoalCompletion {
  const s = core.step(stepIndex, 'recordSubgoalCompletion');
  const known = core.session.task_spec?.subgoals?.map((g) => g.subgoal_id);
  if (!known?.includes(subgoalId)) core.log.warn(`recordSubgoalCompletion: subgoal ${JSON.stringify(subgoalId)} is not in task_spec.subgoals`);
  const c = clamp01(completion);
  let first: number | null = null;
  for (const other of [...core.steps.values()].sort((a, b) => a.step_index - b.step_index)) {
    const prior = other.subgoals_completed?.find((x) => x.subgoal_id === subgoalId && typeof x.first_completed_at_step === 'number');
    if (prior) {
      first = prior.first_completed_at_step!;
      break;
    }
  }
  if (first === null && c >= 1) first = stepIndex;
  const rec: SubgoalCompletion = { subgoal_id: subgoalId, completion: c, first_completed_at_step: first };
  s.subgoals_completed = [...(s.subgoals_completed ?? []).filter((x) => x.subgoal_id !== subgoalId), rec];
  core.touched(s);
  return rec;
}

export function setLoopDetected(core: SessionCore, stepIndex: number, value = true): void {
  const s = core.step(stepIndex, 'setLoopDetected');
  s.loop_detected = value;
  core.touched(s);
}

export function recordPreference(core: SessionCore, stepIndex: number, preference: Record<string, unknown>): void {
  core.preferences.set(stepIndex, { step_index: stepIndex, ...core.id.redaction.apply(structuredClone(preference)), recorded_at: nowIso() });
  core.post({ kind: 'preference', method: 'PUT', path: `${core.runPath}/preferences/${stepIndex}`, key: `pref:${stepIndex}`, body: () => core.preferences.get(stepIndex) });
}
