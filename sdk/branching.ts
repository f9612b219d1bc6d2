// Branching from a parent run: which mode a mutation gets, the branch context
// the new session carries, and the parent's prefix a replay branch starts from.
import type { BranchContext, StepRecord } from '../schemas/trace/types.gen.ts';
import type { SessionCore } from './session-core.ts';
import type { BranchFromOptions, BranchMode } from './session-options.ts';
import { FileStore, type Store } from './store.ts';
import { ValueError, newId } from './util.ts';

/** mode auto resolves to sandbox for an action mutation, else replay; replay cannot re-run a changed action. */
export function resolveBranch(opts: BranchFromOptions): { mode: BranchMode; id: string; branchContext: BranchContext } {
  const mode: BranchMode = opts.mode === undefined || opts.mode === 'auto' ? (opts.mutatedAxis === 'action' ? 'sandbox' : 'replay') : opts.mode;
  if (mode === 'replay' && opts.mutatedAxis === 'action') throw new ValueError('branchFrom: replay mode is refused for an action mutation (use sandbox)');
  if (mode === 'replay' && !opts.parentBundle) throw new ValueError('branchFrom: replay mode needs parentBundle');
  const id = `${opts.parentRunId}:branch:${newId('', 8)}`;
  const branchContext: BranchContext = {
    parent_run_id: opts.parentRunId,
    branch_point_step_index: opts.branchPointStepIndex,
    mutated_axis: opts.mutatedAxis,
    mutation: structuredClone(opts.mutation ?? {}),
    branch_id: opts.branchId ?? id,
    branch_mode: mode,
  };
  return { mode, id, branchContext };
}

/**
 * Copies the parent's steps before the branch point (keeping each original as
 * its replay prior) and their screenshots into the new session.
 */
export async function copyReplayPrefix(core: SessionCore, parentBundle: string | Store, branchPointStepIndex: number): Promise<void> {
  const parent = typeof parentBundle === 'string' ? new FileStore(parentBundle) : parentBundle;
  const files = await parent.list();
  for (const rel of files) {
    const m = /^steps\/(\d{4})\.json$/.exec(rel);
    if (!m || Number(m[1]) >= branchPointStepIndex) continue;
    const prior = JSON.parse(await parent.readText(rel)) as StepRecord;
    core.replayPriors.set(prior.step_index, structuredClone(prior));
    const copy: StepRecord = { ...prior, branch_context: core.branchSlice() };
    if (copy.grounding) copy.grounding = { ...copy.grounding };
    core.steps.set(copy.step_index, copy);
    core.streamStep(copy);
  }
  for (const rel of files) {
    const m = /^screenshots\/(\d{4})_(pre|post|target|diff|intervention_before|intervention_after)\.png$/.exec(rel);
    if (!m || Number(m[1]) >= branchPointStepIndex) continue;
    const bytes = await parent.readBytes(rel);
    await core.putFile(rel, bytes);
    core.post({ kind: 'screenshot', method: 'POST', path: `${core.runPath}/screenshots/${Number(m[1])}/${m[2]}`, image: bytes });
  }
}
