// Side effects a step declares before acting on the world, then commits or
// aborts; an operator's kill aborts the ones still pending.
import type { SideEffect } from '../schemas/trace/types.gen.ts';
import type { SessionCore } from './session-core.ts';
import { ValueError, newId, nowIso, safeId } from './util.ts';

export interface SideEffectDeclaration {
  stepIndex: number;
  resource: string;
  action: string;
  idempotencyKey?: string | null;
  reversibility?: SideEffect['reversibility'];
  compensationHandle?: string | null;
  provenance?: SideEffect['provenance'];
  sideEffectId?: string;
}

function putSideEffect(core: SessionCore, se: SideEffect): void {
  core.post({ kind: 'side_effect', method: 'PUT', path: `${core.runPath}/side-effects/${encodeURIComponent(se.side_effect_id)}`, key: `se:${se.side_effect_id}`, body: () => core.sideEffects.get(se.side_effect_id) });
}

export function declareSideEffect(core: SessionCore, d: SideEffectDeclaration): string {
  const se: SideEffect = {
    side_effect_id: d.sideEffectId ?? newId('se_'),
    step_index: d.stepIndex,
    resource: d.resource,
    action: d.action,
    idempotency_key: d.idempotencyKey ?? null,
    reversibility: d.reversibility ?? 'irreversible',
    compensation_handle: d.compensationHandle ?? null,
    provenance: d.provenance ?? 'sdk_declared',
    state: 'declared',
    declared_at: nowIso(),
  };
  safeId('declareSideEffect: side_effect_id', se.side_effect_id);
  if (core.sideEffects.has(se.side_effect_id)) throw new ValueError(`declareSideEffect: ${se.side_effect_id} is already declared`);
  core.checkOrThrow('side-effect', se);
  core.sideEffects.set(se.side_effect_id, se);
  putSideEffect(core, se);
  return se.side_effect_id;
}

function declared(core: SessionCore, id: string, method: string): SideEffect {
  const se = core.sideEffects.get(id);
  if (!se) throw new ValueError(`${method}: unknown side effect ${id}`);
  if (se.state !== 'declared') throw new ValueError(`${method}: side effect ${id} is already ${se.state}`);
  return se;
}

export function commitSideEffect(core: SessionCore, id: string, observedResult?: unknown): SideEffect {
  const se = declared(core, id, 'commitSideEffect');
  se.state = 'committed';
  se.committed_at = nowIso();
  if (observedResult !== undefined) se.observed_result = core.id.redaction.apply(structuredClone(observedResult), 'observed_result');
  putSideEffect(core, se);
  return se;
}

export function markSideEffectAborted(core: SessionCore, id: string, reason: string): SideEffect {
  const se = declared(core, id, 'markSideEffectAborted');
  se.state = 'aborted';
  se.aborted_at = nowIso();
  se.reason = reason;
  putSideEffect(core, se);
  return se;
}

export function abortPendingSideEffects(core: SessionCore, reason: string): string[] {
  const ids: string[] = [];
  for (const se of core.sideEffects.values()) {
    if (se.state !== 'declared') continue;
    markSideEffectAborted(core, se.side_effect_id, reason);
    ids.push(se.side_effect_id);
  }
  return ids;
}

export function sideEffect(core: SessionCore, id: string): SideEffect | undefined {
  const se = core.sideEffects.get(id);
  return se ? structuredClone(se) : undefined;
}
