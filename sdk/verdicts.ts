// Judging a step: a verifier's verdict, a score merged into the verdict, and
// the decisions of judges (the last one promoted unless told otherwise).
import type { JudgeDecision, StepRecord, Verdict } from '../schemas/trace/types.gen.ts';
import type { SessionCore } from './session-core.ts';
import { ValueError, clamp01, nowIso } from './util.ts';

export interface VerifierInput { status: Verdict['status']; reason?: string | null; check?: string; expected?: unknown; actual?: unknown; evidenceRefs?: string[] }
export type ScoreOptions = { comparator?: Verdict['comparator']; components?: Record<string, number>; shouldStop?: boolean; uncertainty?: number };
export type JudgeDecisionInput = { judgeId: string; judgeType: JudgeDecision['judge_type']; verdict: Verdict; confidence?: number | null; evidenceRefs?: string[]; judgedAt?: string; promote?: boolean };

const COMPARATORS = ['verifier', 'model-judge', 'exact-match', 'human'] as const;

export function attachVerifier(core: SessionCore, stepIndex: number, v: VerifierInput): Verdict {
  const s = core.step(stepIndex, 'attachVerifier');
  const reason = v.reason ?? (v.check !== undefined || v.expected !== undefined || v.actual !== undefined ? `${v.check ?? 'check'}: expected ${JSON.stringify(v.expected ?? null)}, actual ${JSON.stringify(v.actual ?? null)}` : null);
  const verdict: Verdict = { status: v.status, reason, comparator: 'verifier' };
  if (v.check !== undefined) verdict.check = v.check;
  if (v.expected !== undefined) verdict.expected = core.id.redaction.apply(v.expected, 'expected');
  if (v.actual !== undefined) verdict.actual = core.id.redaction.apply(v.actual, 'actual');
  if (v.evidenceRefs) verdict.evidence_refs = [...v.evidenceRefs];
  core.checkOrThrow('verdict', verdict);
  s.verdict = verdict;
  s.verdict_source = 'rule:attach_verifier';
  s.judge_decisions = [
    ...(s.judge_decisions ?? []),
    { judge_id: 'attach_verifier', judge_type: 'rule', verdict: structuredClone(verdict), confidence: null, evidence_refs: [...(v.evidenceRefs ?? [])], judged_at: nowIso() },
  ];
  core.touched(s);
  return verdict;
}

export function setScore(core: SessionCore, stepIndex: number, score: number, opts: ScoreOptions = {}): Verdict {
  const s = core.step(stepIndex, 'setScore');
  if (opts.comparator !== undefined && !(COMPARATORS as readonly string[]).includes(opts.comparator)) {
    throw new ValueError(`setScore: unknown comparator ${JSON.stringify(opts.comparator)}; one of ${COMPARATORS.join(', ')}`);
  }
  const verdict: Verdict = { ...(s.verdict ?? { status: inferredVerdictStatus(s) }) };
  verdict.score = clamp01(score);
  if (opts.comparator) verdict.comparator = opts.comparator;
  if (opts.components) {
    for (const [k, v] of Object.entries(opts.components)) if (typeof v !== 'number' || !Number.isFinite(v)) throw new ValueError(`setScore: component ${k} must be a number`);
    verdict.score_components = { ...(verdict.score_components ?? {}), ...opts.components };
  }
  if (opts.shouldStop !== undefined) verdict.should_stop = opts.shouldStop;
  if (opts.uncertainty !== undefined) verdict.uncertainty = clamp01(opts.uncertainty);
  s.verdict = verdict;
  s.verdict_source ??= 'native';
  core.touched(s);
  return verdict;
}

export function recordJudgeDecision(core: SessionCore, stepIndex: number, d: JudgeDecisionInput): JudgeDecision {
  const s = core.step(stepIndex, 'recordJudgeDecision');
  const decision: JudgeDecision = {
    judge_id: d.judgeId,
    judge_type: d.judgeType,
    verdict: structuredClone(d.verdict),
    confidence: d.confidence ?? null,
    evidence_refs: [...(d.evidenceRefs ?? [])],
    judged_at: d.judgedAt ?? nowIso(),
  };
  core.checkOrThrow('judge-decision', decision);
  s.judge_decisions = [...(s.judge_decisions ?? []), decision];
  if (d.promote ?? true) {
    s.verdict = structuredClone(decision.verdict);
    s.verdict_source = `${decision.judge_type}:${decision.judge_id}`;
  }
  core.touched(s);
  core.post({ kind: 'judge_decision', method: 'POST', path: `${core.runPath}/steps/${stepIndex}/judge-decisions`, body: decision });
  return decision;
}

/** The verdict a step without one gets from its status (at close, or under a first score). */
export function inferredVerdictStatus(s: StepRecord): Verdict['status'] {
  switch (s.status) {
    case 'passed':
      return 'passed';
    case 'failed':
    case 'halted':
      return 'failed';
    case 'skipped':
      return 'skipped';
    default:
      return 'uncertain';
  }
}
