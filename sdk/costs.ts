// Costs: the run's and each step's, how they are checked on the way in, and how
// the steps roll up under the run (the manifest, trace.json and outcomes all
// report the same rollup).
import type { Costs, StepCosts, StepRecord } from '../schemas/trace/types.gen.ts';
import type { SessionCore } from './session-core.ts';
import { ValueError, canonicalJson, sha256Hex } from './util.ts';

const COST_KEYS = ['total_usd', 'model_usd', 'gpu_usd', 'proxy_usd', 'tokens_in', 'tokens_out', 'cache_hit_tokens'] as const;
const STEP_COST_KEYS = ['total_usd', 'model_usd', 'tokens_in', 'tokens_out', 'cache_hit_tokens'] as const;
const INT_COST_KEYS = new Set(['tokens_in', 'tokens_out', 'cache_hit_tokens']);

/** Sums step costs key by key, then lays the session-level costs over them (the session wins ties). */
export function rollupCosts(steps: Iterable<StepRecord>, session: Costs): Costs {
  const out: Costs = {};
  for (const s of steps) {
    for (const k of STEP_COST_KEYS) {
      const v = s.costs?.[k];
      if (typeof v === 'number') out[k] = (out[k] ?? 0) + v;
    }
  }
  for (const k of STEP_COST_KEYS) if (!INT_COST_KEYS.has(k) && typeof out[k] === 'number') out[k] = Math.round(out[k] * 1e9) / 1e9;
  return { ...out, ...session };
}

/** sha256 over the canonical sequence of (step_index, action, status): the same path through a task hashes the same. */
export function trajectoryFingerprint(steps: StepRecord[]): string {
  return sha256Hex(canonicalJson(steps.map((s) => [s.step_index, s.action?.type ?? null, s.action?.params ?? null, s.status ?? null])));
}

function mergeCosts<T extends Costs>(target: T, patch: Partial<Costs>, keys: readonly string[], where: string): boolean {
  let changed = false;
  for (const [k, v] of Object.entries(patch)) {
    if (v === undefined || v === null) continue;
    if (!keys.includes(k)) throw new ValueError(`${where}: unknown cost field ${k}`);
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || (INT_COST_KEYS.has(k) && !Number.isInteger(v))) throw new ValueError(`${where}: ${k} must be a ${INT_COST_KEYS.has(k) ? 'non-negative integer' : 'non-negative number'}`);
    (target as Record<string, number>)[k] = v;
    changed = true;
  }
  return changed;
}

export function setCosts(core: SessionCore, patch: Partial<Costs>): Costs {
  if (mergeCosts(core.costs, patch, COST_KEYS, 'setCosts')) {
    core.post({ kind: 'costs', method: 'PUT', path: `${core.runPath}/costs`, key: 'costs', body: () => ({ ...core.costs }) });
  }
  return { ...core.costs };
}

export function setStepCosts(core: SessionCore, stepIndex: number, patch: Partial<StepCosts>): StepCosts {
  const s = core.step(stepIndex, 'setStepCosts');
  const costs = { ...(s.costs ?? {}) };
  if (mergeCosts(costs, patch, STEP_COST_KEYS, 'setStepCosts')) {
    s.costs = costs;
    core.touched(s);
  }
  return { ...costs };
}
