// Replays as the runner and predict see them (issue 45): which plan a submission
// runs (a compiled plan by id or by cache key, else its own), the session a replay
// run's steps go through, and what a run leaves when it succeeds: its brain steps
// compiled into a stored plan, or a replay's heals written back into the plan it ran.
import { badRequest } from '../errors.ts';
import type { LearnedStep, Step, StepHandler } from '../plugins/contract.ts';
import type { RunRecord, RunReplay } from '../runs/records.ts';
import { cacheKey, compilePlan, startUrlOf } from './compile.ts';
import { ReplaySession } from './session.ts';
import type { CompiledPlan, CompiledPlanStore } from './store.ts';


export interface ReplayOption {
  compiled_plan_id?: string;
  cache?: boolean;
}

/** What a submission runs: the plan given, or a compiled plan in its place. */
export interface Resolved {
  plan: unknown;
  replay: RunReplay;
}

const TOP = /^steps\[(\d+)\]$/;

export class ReplayService {
  constructor(
    readonly store: CompiledPlanStore,
    private readonly handler: (type: string) => StepHandler | undefined,
  ) {}

  /** The plan a submission runs. `plan` is the submitted one (undefined with compiled_plan_id). */
  async resolve(tenantId: string, plan: unknown, option: ReplayOption | undefined): Promise<Resolved> {
    if (option?.compiled_plan_id !== undefined) {
      if (plan !== undefined) throw badRequest('replay: a compiled_plan_id is the plan; give no plan or micro with it', 'replay');
      return this.replaying(await this.store.get(tenantId, option.compiled_plan_id));
    }
    const steps = stepsOf(plan);
    const key = cacheKey(tenantId, steps);
    if (option?.cache) {
      const hit = await this.store.byCacheKey(tenantId, key);
      if (hit) return this.replaying(hit);
    }
    return { plan, replay: { cache_key: key } };
  }

  private replaying(p: CompiledPlan): Resolved {
    return { plan: p.plan, replay: { cache_key: p.cache_key, compiled_plan_id: p.compiled_plan_id, replayed_from: p.source_run_id } };
  }

  /** The session a replay run's steps go through; undefined for a run that replays nothing. */
  session(run: RunRecord, emit: (type: string, data: Record<string, unknown>) => Promise<void>): ReplaySession | undefined {
    const id = run.replay?.compiled_plan_id;
    return id ? new ReplaySession(id, run.run_id, emit, this.handler) : undefined;
  }

  /**
   * After a run that succeeded: a replay's heals go into its compiled plan; a run that
   * learned brain steps stores them compiled. Returns the event to emit, if any.
   */
  async finish(run: RunRecord, learned: ReadonlyMap<string, LearnedStep>, session: ReplaySession | undefined): Promise<{ type: string; data: Record<string, unknown> } | undefined> {
    const r = run.replay;
    if (!r) return undefined;
    if (session) {
      await this.store.replayedBy(run.tenant_id, session.compiledPlanId, run.run_id);
      if (session.heals.length === 0) return undefined;
      const p = await this.store.healed(run.tenant_id, session.compiledPlanId, run.run_id, session.healedSteps(run.plan.steps), session.heals.length);
      return p ? { type: 'run.plan_compiled', data: { compiled_plan_id: p.compiled_plan_id, healed_steps: session.heals.length } } : undefined;
    }
    const byIndex = new Map<number, LearnedStep>();
    for (const [path, l] of learned) {
      const m = TOP.exec(path);
      if (m) byIndex.set(Number(m[1]), l);
    }
    if (byIndex.size === 0) return undefined;
    const c = compilePlan(run.plan.steps, byIndex, run.run_id);
    if (c.compiled === 0) return { type: 'run.plan_compiled', data: { compiled_plan_id: null, compiled_steps: 0, kept: c.kept } };
    const p = await this.store.save(run.tenant_id, run.run_id, { cache_key: r.cache_key, start_url: startUrlOf(run.plan.steps), plan: { steps: c.steps, runtime: run.plan.runtime as Record<string, unknown> }, compiled_steps: c.compiled });
    return { type: 'run.plan_compiled', data: { compiled_plan_id: p.compiled_plan_id, compiled_steps: c.compiled, kept: c.kept } };
  }
}

function stepsOf(plan: unknown): Step[] {
  if (Array.isArray(plan)) return plan as Step[];
  const steps = (plan as { steps?: unknown } | undefined)?.steps;
  return Array.isArray(steps) ? (steps as Step[]) : [];
}

/** After a run that succeeded, before its end is written: its plan compiled or healed, and the event that says so; a failure is logged, never the run's. */
export async function learnFrom(
  service: ReplayService,
  store: { emit(r: RunRecord, type: string, data: Record<string, unknown>): Promise<void> },
  run: RunRecord,
  learned: ReadonlyMap<string, LearnedStep>,
  session: ReplaySession | undefined,
  log: { warn(o: object, msg: string): void },
): Promise<void> {
  try {
    const e = await service.finish(run, learned, session);
    if (e) await store.emit(run, e.type, e.data);
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'the run succeeded, and its compiled plan could not be stored');
  }
}
