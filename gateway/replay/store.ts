// Compiled plans (issue 45), per tenant in the store of record (SQLite, PostgreSQL,
// Redis: the keyed stores every backend has): the plans by id, and two indexes,
// the run each plan came from or was replayed by, and the cache key. One plan per
// cache key: a later run of the same plan that compiles again replaces it in place.
import { randomBytes } from 'node:crypto';
import { ServiceError, notFound } from '../errors.ts';
import { unreachableDependency, type KeyedStore, type StateBackend } from '../state/backend.ts';
import type { Step } from '../plugins/contract.ts';

export interface CompiledPlan {
  compiled_plan_id: string;
  source_run_id: string;
  cache_key: string;
  start_url: string | null;
  plan: { steps: Step[]; runtime: Record<string, unknown> };
  compiled_steps: number;
  heals: number;
  last_healed_by: string | null;
  created_at: string;
  updated_at: string;
}

/** cp_ and 32 hex digits: ids become store keys, so anything else names no plan */
const ID = /^cp_[0-9a-f]{32}$/;
/** run ids are UUIDs; the cap keeps a stray value from becoming a long key */
const RUN_ID = /^[A-Za-z0-9_-]{1,128}$/;

export const isCompiledPlanId = (id: string): boolean => ID.test(id);

export class CompiledPlanStore {
  constructor(
    private readonly backend: StateBackend,
    private readonly maxPerTenant: number,
  ) {}

  private plans(tenantId: string): KeyedStore<CompiledPlan> {
    return this.backend.store<CompiledPlan>(`compiled_plans:${tenantId}`);
  }

  private byRun(tenantId: string): KeyedStore<string> {
    return this.backend.store<string>(`compiled_plan_runs:${tenantId}`);
  }

  private byKey(tenantId: string): KeyedStore<string> {
    return this.backend.store<string>(`compiled_plan_keys:${tenantId}`);
  }

  async get(tenantId: string, id: string): Promise<CompiledPlan> {
    const p = ID.test(id) ? await this.plans(tenantId).get(id) : undefined;
    if (!p) throw notFound('compiled plan not found');
    return p;
  }

  /** The compiled plan a run was compiled into or replayed (404 when none). */
  async ofRun(tenantId: string, runId: string): Promise<CompiledPlan> {
    const id = RUN_ID.test(runId) ? await this.byRun(tenantId).get(runId) : undefined;
    const p = id ? await this.plans(tenantId).get(id) : undefined;
    if (!p) throw notFound(`run ${runId} has no compiled plan`);
    return p;
  }

  async byCacheKey(tenantId: string, key: string): Promise<CompiledPlan | undefined> {
    const id = await this.byKey(tenantId).get(key);
    return id ? this.plans(tenantId).get(id) : undefined;
  }

  async list(tenantId: string): Promise<Array<Pick<CompiledPlan, 'compiled_plan_id' | 'source_run_id' | 'cache_key' | 'start_url' | 'heals' | 'updated_at'>>> {
    const s = this.plans(tenantId);
    const all = await Promise.all((await s.keys()).map((k) => s.get(k)));
    return all
      .filter((p): p is CompiledPlan => p !== undefined)
      .sort((a, b) => b.updated_at.localeCompare(a.updated_at))
      .map(({ compiled_plan_id, source_run_id, cache_key, start_url, heals, updated_at }) => ({ compiled_plan_id, source_run_id, cache_key, start_url, heals, updated_at }));
  }

  /** Stores what a run compiled: in place of the plan under its cache key, else as a new plan. */
  async save(tenantId: string, runId: string, fields: Pick<CompiledPlan, 'cache_key' | 'start_url' | 'plan' | 'compiled_steps'>): Promise<CompiledPlan> {
    const now = new Date().toISOString();
    const old = await this.byCacheKey(tenantId, fields.cache_key);
    if (!old && (await this.plans(tenantId).keys()).length >= this.maxPerTenant) {
      throw new ServiceError('conflict', `compiled plan limit reached: a tenant may keep at most ${this.maxPerTenant}; delete one first`);
    }
    const plan: CompiledPlan = { compiled_plan_id: old?.compiled_plan_id ?? `cp_${randomBytes(16).toString('hex')}`, source_run_id: runId, ...fields, heals: 0, last_healed_by: null, created_at: old?.created_at ?? now, updated_at: now };
    await this.write(tenantId, plan);
    await this.byKey(tenantId).set(fields.cache_key, plan.compiled_plan_id);
    await this.byRun(tenantId).set(runId, plan.compiled_plan_id);
    return plan;
  }

  /** A replay healed steps: the plan's new steps; and the replay run reads it back as its compiled plan. */
  async healed(tenantId: string, id: string, runId: string, steps: Step[], heals: number): Promise<CompiledPlan | undefined> {
    const old = await this.plans(tenantId).get(id);
    // deleted while the replay ran: nothing to heal
    if (!old) return undefined;
    const plan: CompiledPlan = { ...old, plan: { ...old.plan, steps }, heals: old.heals + heals, last_healed_by: runId, updated_at: new Date().toISOString() };
    await this.write(tenantId, plan);
    return plan;
  }

  /** A replay run reads back the compiled plan it ran. */
  async replayedBy(tenantId: string, id: string, runId: string): Promise<void> {
    await this.byRun(tenantId).set(runId, id);
  }

  async delete(tenantId: string, id: string): Promise<{ compiled_plan_id: string; deleted: boolean }> {
    const p = await this.get(tenantId, id);
    try {
      const deleted = await this.plans(tenantId).delete(id);
      if ((await this.byKey(tenantId).get(p.cache_key)) === id) await this.byKey(tenantId).delete(p.cache_key);
      return { compiled_plan_id: id, deleted };
    } catch (err) {
      if (unreachableDependency(err)) throw err;
      throw new ServiceError('persist_failed', `compiled plan ${id} could not be deleted`);
    }
  }

  private async write(tenantId: string, plan: CompiledPlan): Promise<void> {
    try {
      await this.plans(tenantId).set(plan.compiled_plan_id, plan);
    } catch (err) {
      if (unreachableDependency(err)) throw err;
      throw new ServiceError('persist_failed', `compiled plan ${plan.compiled_plan_id} could not be stored`);
    }
  }
}
