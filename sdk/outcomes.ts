// What the run produced: outcomes with their cost summary, and the steps marked
// as candidates for evaluation.
import type { Costs, EvalCandidate, OutcomeRecord, Verdict } from '../schemas/trace/types.gen.ts';
import { rollupCosts } from './costs.ts';
import type { SessionCore } from './session-core.ts';
import { ValueError, nowIso } from './util.ts';

export interface OutcomeInput { scope?: 'session' | 'step'; stepIndex?: number | null; verdict: Verdict; taskClass?: string | null; costSummary?: Costs }

export function markForEval(core: SessionCore, stepIndex: number, opts: { reason: string; candidateClusterId?: string | null }): EvalCandidate {
  const prior = core.evalCandidates.get(stepIndex);
  if (prior) return prior;
  const c: EvalCandidate = { step_index: stepIndex, reason: opts.reason, candidate_cluster_id: opts.candidateClusterId ?? null, marked_at: nowIso() };
  core.checkOrThrow('eval-candidate', c);
  core.evalCandidates.set(stepIndex, c);
  core.post({ kind: 'eval_candidate', method: 'POST', path: `${core.runPath}/eval-candidates`, key: `eval:${stepIndex}`, body: c });
  return c;
}

export function finalizeOutcome(core: SessionCore, opts: OutcomeInput): OutcomeRecord {
  const scope = opts.scope ?? 'session';
  let cost: Costs;
  if (scope === 'step') {
    if (opts.stepIndex === undefined || opts.stepIndex === null) throw new ValueError('finalizeOutcome: scope step needs step_index');
    cost = opts.costSummary ?? { ...(core.step(opts.stepIndex, 'finalizeOutcome').costs ?? {}) };
  } else {
    cost = opts.costSummary ?? rollupCosts(core.steps.values(), core.costs);
  }
  const o: OutcomeRecord = {
    scope,
    step_index: scope === 'step' ? opts.stepIndex! : null,
    verdict: structuredClone(opts.verdict),
    task_class: opts.taskClass ?? core.session.task_spec?.task_class ?? null,
    cost_summary: cost,
    recorded_at: nowIso(),
  };
  core.checkOrThrow('outcome', o);
  core.outcomes.push(o);
  core.post({ kind: 'outcome', method: 'POST', path: `${core.runPath}/outcomes`, body: o });
  return o;
}

export function successfulTaskCostSummary(core: SessionCore): Costs | null {
  for (let i = core.outcomes.length - 1; i >= 0; i--) {
    const o = core.outcomes[i]!;
    if (o.scope === 'session' && o.verdict.status === 'passed') return { ...(o.cost_summary ?? {}) };
  }
  return null;
}
