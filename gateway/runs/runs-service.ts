// Run records and their lifecycle at the edge: accept (queued), read, cancel,
// and end exactly once (the concurrency slot and profile lock are released by
// the one call that moves a run to a terminal state, or taken back from a run
// whose record says it ended). Executing plans is the runner's job.
import { randomUUID } from 'node:crypto';
import { isSafeId } from '../../shared/ids.ts';
import { ServiceError, badRequest, notFound } from '../errors.ts';
import { profileLockKey, profileSavingKey, waitWhileSaving, type AtomicOps } from '../state/atomic.ts';
import { BadCursor, type RunPage, type RunQuery, type RunTable } from '../state/tables.ts';
import { unreachableDependency } from '../state/backend.ts';
import type { Limits } from '../http/limits.ts';
import type { Tenant } from '../http/tenants.ts';
import { failureHelp } from './failure-help.ts';
import type { NormalizedPlan } from './plan-policy.ts';
import { TERMINAL, lifecycleOf, statusBody, type EffectiveRuntime, type LifecycleBody, type RunLifecycle, type RunRecord, type RunReplay, type RunStatus } from './records.ts';
import type { EventLog } from './events.ts';
import { runnerKey } from './owners.ts';
import { outboxItem, type DeliveryAttempt, type Webhooks, type WebhookTarget } from './webhooks.ts';

export interface RunOutcome {
  status: Exclude<RunStatus, 'queued' | 'running'>;
  haltClass?: string | null;
  error?: string | null;
  summary?: string;
  steps?: unknown[];
  unknownPlaceholderRows?: number;
  /** extraction_quality counters beyond the placeholder rows */
  extractionCounts?: Record<string, number>;
  retriesSpent?: number;
  /** What this run met, put first in failure_help.likely_causes (a refused host). */
  cause?: string;
  /** Top-level step index a resume would restart at (failed and cancelled runs). */
  resumeStep?: number;
  /** What the run's model calls cost, in USD. */
  costUsd?: number;
}

export interface NewRun {
  plan: NormalizedPlan;
  runtime: EffectiveRuntime;
  cua_model: string;
  profile_id?: string;
  workflow_id?: string;
  callback_url?: string;
  detached: boolean;
  webhook?: WebhookTarget;
  resumed_from?: string;
  start_step?: number;
  /** The hosts the plane's egress guard lets the run reach; absent: the tenant's allowed_domains. */
  allowed_domains?: readonly string[];
  replay?: RunReplay;
}

/** How long POST /v1/runs/{id}/cancel waits for a running run to end before it answers `cancelling`. */
export const CANCEL_WAIT_MS = 5_000;

/** The claim that picks a run's one ending where the store cannot write the row and the event in one commit (Redis, memory). */
const endingKey = (runId: string): string => `ending:${runId}`;
/** Endings race within seconds, and the ended row refuses any later one (putUnlessEnded): the claim need only outlive the race. */
const ENDING_CLAIM_MS = 10 * 60_000;

/** A run's event as the log takes it; `ts` absent: the log stamps it now. */
const eventOf = (r: RunRecord, type: string, data: Record<string, unknown>, ts?: string) => ({ run_id: r.run_id, tenant_id: r.tenant_id, type, data, ts });

export class RunsService {
  private readonly acceptedListeners: Array<(runId: string) => void> = [];

  /** Called with each accepted run's id (the runner's scheduler listens). */
  onAccepted(listener: (runId: string) => void): void {
    this.acceptedListeners.push(listener);
  }

  constructor(
    private readonly runs: RunTable<RunRecord, RunLifecycle>,
    private readonly atomic: AtomicOps,
    private readonly limits: Limits,
    private readonly events: EventLog,
    private readonly webhooks: Webhooks,
  ) {}

  private profileKey(tenantId: string, profileId: string): string {
    return `profile:${tenantId}/${profileId}`;
  }

  private readonly holderChecks: Array<(tenantId: string, holder: string) => Promise<boolean>> = [];

  /** `check(tenantId, holder)` says whether a slot or profile-lock holder that is not a run has ended (browser sessions share both). */
  addHolderCheck(check: (tenantId: string, holder: string) => Promise<boolean>): void {
    this.holderChecks.push(check);
  }

  /** Creates a queued run holding a concurrency slot (and its profile lock). */
  async accept(tenant: Tenant, spec: NewRun): Promise<RunRecord> {
    const runId = randomUUID();
    await this.limits.acquireRunSlot(tenant, runId, (h) => this.endedHolder(h, tenant.tenant_id));
    let lockKey: string | undefined;
    try {
      if (spec.profile_id) {
        lockKey = this.profileKey(tenant.tenant_id, spec.profile_id);
        const ttlMs = (spec.runtime.max_time_minutes + 5) * 60_000;
        let holder = await this.atomic.claim(lockKey, runId, ttlMs);
        if (holder !== null && (await waitWhileSaving(this.atomic, holder))) holder = await this.atomic.claim(lockKey, runId, ttlMs);
        if (holder !== null && (await this.endedHolder(holder, tenant.tenant_id)) && (await this.atomic.deleteIf(lockKey, holder))) holder = await this.atomic.claim(lockKey, runId, ttlMs);
        if (holder !== null) {
          lockKey = undefined;
          throw new ServiceError('profile_busy', `profile '${spec.profile_id}' is busy: run ${holder} holds its lock`);
        }
      }
      const now = new Date().toISOString();
      const record: RunRecord = {
        run_id: runId,
        tenant_id: tenant.tenant_id,
        status: 'queued',
        phase: 'queued',
        halt_class: null,
        failure_help: null,
        error: null,
        created_at: now,
        updated_at: now,
        ended_at: null,
        cua_model: spec.cua_model,
        profile_id: spec.profile_id ? `${tenant.tenant_id}/${spec.profile_id}` : null,
        workflow_id: spec.workflow_id ? `${tenant.tenant_id}/${spec.workflow_id}` : null,
        callback_url: spec.callback_url ?? null,
        detached: spec.detached,
        plan: spec.plan,
        runtime: spec.runtime,
        summary: '',
        steps: [],
        unknown_placeholder_row_count: 0,
        events: [`${now} run accepted: ${spec.plan.steps.length} top-level steps on ${spec.runtime.compute_backend}, brain ${spec.cua_model}`, `${now} status queued`],
        webhook: spec.webhook ?? null,
        webhook_deliveries: [],
        resumed_from: spec.resumed_from ?? null,
        start_step: spec.start_step ?? 0,
        resume_step: null,
        allowed_domains: [...(spec.allowed_domains ?? tenant.allowed_domains)],
        ...(spec.replay ? { replay: spec.replay } : {}),
      };
      const queued = { run_id: runId, tenant_id: tenant.tenant_id, type: 'run.status', data: { status: 'queued', phase: 'queued' } };
      // on the SQL stores the row and its first event are one commit (one fsync on SQLite, one round trip on PostgreSQL)
      if (this.events.appendWithRun) {
        await this.events.appendWithRun(record, queued);
      } else {
        await this.runs.put(record);
        await this.events.append(queued);
      }
      for (const l of this.acceptedListeners) l(runId);
      return record;
    } catch (err) {
      if (lockKey) await this.atomic.deleteIf(lockKey, runId).catch(() => {});
      await this.limits.releaseRunSlot(tenant.tenant_id, runId).catch(() => {});
      throw err;
    }
  }

  /** The tenant's run, or 404 (another tenant's run is indistinguishable from none). */
  async get(tenant: Tenant, runId: string): Promise<RunRecord> {
    return this.owned(tenant, runId, (id) => this.runs.get(id));
  }

  /** The status body of a tenant's run, read from its view, without the run's steps and logs (the most polled route). */
  async status(tenant: Tenant, runId: string): Promise<ReturnType<typeof statusBody>> {
    return statusBody((await this.owned(tenant, runId, (id) => this.runs.view(id))) as RunLifecycle & { status: RunStatus });
  }

  /** The lifecycle body of a tenant's run, read from its view. */
  async lifecycle(tenant: Tenant, runId: string): Promise<LifecycleBody> {
    return lifecycleOf(await this.owned(tenant, runId, (id) => this.runs.view(id)));
  }

  /** `read(runId)` when it names a run of this tenant, else 404. */
  private async owned<R extends { tenant_id: string }>(tenant: Tenant, runId: string, read: (runId: string) => Promise<R | undefined>): Promise<R> {
    // a run id is a safe id; anything else names no run (and never reaches the store: PostgreSQL refuses NUL in a key)
    if (!isSafeId(runId)) throw notFound('run not found');
    const r = await read(runId);
    if (!r || r.tenant_id !== tenant.tenant_id) throw notFound(`run ${runId} not found`);
    return r;
  }

  /** The tenant's runs' lifecycle bodies, newest first, a page at a time. */
  async list(tenant: Tenant, q: RunQuery): Promise<RunPage<LifecycleBody>> {
    try {
      const page = await this.runs.page(tenant.tenant_id, q);
      return { items: page.items.map(lifecycleOf), next_cursor: page.next_cursor };
    } catch (err) {
      if (err instanceof BadCursor) throw badRequest(err.message, 'cursor');
      throw err;
    }
  }

  /** Every run still queued or running, whoever owns it (recovery). */
  unfinished(): Promise<RunRecord[]> {
    return this.runs.unfinished();
  }

  /** Reads a run by id, whoever owns it (the runner's view). */
  async load(runId: string): Promise<RunRecord | undefined> {
    return this.runs.get(runId);
  }

  /**
   * Saves a run its runner is working on, fenced by the runner's lease: false
   * (nothing written) once the run has ended (recovered, cancelled) or the lease
   * is no longer this runner's, which tells the runner to stop.
   */
  async save(r: RunRecord, owner: string): Promise<boolean> {
    return this.runs.putIfLeased({ ...r, updated_at: new Date().toISOString() }, runnerKey(r.run_id), owner);
  }

  /**
   * save then emit as one write: on the SQL stores one commit, the event
   * appended only if the fenced save held; elsewhere the save first and the
   * event only after it held. False: nothing written, as save's false.
   */
  async saveAndEmit(r: RunRecord, owner: string, type: string, data: Record<string, unknown>, ts?: string): Promise<boolean> {
    const row = { ...r, updated_at: new Date().toISOString() };
    const event = eventOf(r, type, data, ts);
    if (this.events.appendIfLeased) return (await this.events.appendIfLeased(row, runnerKey(r.run_id), owner, event)) !== null;
    if (!(await this.runs.putIfLeased(row, runnerKey(r.run_id), owner))) return false;
    await this.events.append(event);
    return true;
  }

  /**
   * A runner's event between its saves: appended only while `owner` holds the
   * run's lease and the run is unfinished (one transaction on the SQL stores;
   * elsewhere the lease and the row are read, then the event appended, the same
   * gap as their fenced save). False: not appended; the runner has lost the run.
   */
  async emitFenced(r: RunRecord, owner: string, type: string, data: Record<string, unknown>, ts?: string): Promise<boolean> {
    const event = eventOf(r, type, data, ts);
    if (this.events.appendWhileLeased) return (await this.events.appendWhileLeased(runnerKey(r.run_id), owner, event)) !== null;
    if ((await this.atomic.get(runnerKey(r.run_id))) !== owner) return false;
    const current = await this.runs.get(r.run_id);
    if (!current || TERMINAL.has(current.status)) return false;
    await this.events.append(event);
    return true;
  }

  async emit(r: RunRecord, type: string, data: Record<string, unknown>, ts?: string): Promise<void> {
    await this.events.append(eventOf(r, type, data, ts));
  }

  /**
   * True when the run's log holds an event of this type, time and data: how a
   * runner whose write's answer was lost with the connection learns that its
   * commit landed. Reads the whole log, which only a retry after an outage does.
   */
  async emitted(runId: string, e: { type: string; ts: string; data: Record<string, unknown> }): Promise<boolean> {
    const data = JSON.stringify(e.data);
    return (await this.history(runId)).some((h) => h.type === e.type && h.ts === e.ts && JSON.stringify(h.data) === data);
  }

  /**
   * Cancels a run and answers it as it is once the cancel took: ended (a queued
   * run at once; a running one when its runner stops within `waitMs`), else
   * still running with phase `cancelling` (its runner is closing the browser).
   */
  async cancel(tenant: Tenant, runId: string, waitMs = CANCEL_WAIT_MS): Promise<RunRecord> {
    const r = await this.get(tenant, runId);
    if (TERMINAL.has(r.status)) return r;
    if (r.status === 'queued' && !(await this.runnerOwns(r.run_id))) return this.end(r, { status: 'cancelled', haltClass: 'cancelled' });
    // a runner holds it: ask it to stop; it ends the run with halt class cancelled
    let stop = () => undefined as unknown;
    const ended = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, waitMs);
      const unsubscribe = this.events.subscribe(`run:${r.run_id}`, (e) => e.type === 'run.ended' && resolve());
      stop = () => {
        clearTimeout(timer);
        unsubscribe();
      };
    });
    try {
      await this.emit(r, 'run.cancel_requested', {});
      await ended;
    } finally {
      stop();
    }
    const now = (await this.runs.get(r.run_id)) ?? r;
    return TERMINAL.has(now.status) ? now : { ...now, phase: 'cancelling' };
  }

  /** True while a runner has claimed the run (set by the runner when it starts one). */
  private async runnerOwns(runId: string): Promise<boolean> {
    return (await this.atomic.get(runnerKey(runId))) !== null;
  }

  /** Claims a queued run for execution; false when someone else has it or it has ended. */
  async claimForRunner(runId: string, owner: string, ttlMs: number): Promise<boolean> {
    return (await this.atomic.claim(runnerKey(runId), owner, ttlMs)) === null;
  }

  /** The runner's heartbeat: false when its lease is gone (expired, or the run was recovered). */
  renewRunner(runId: string, owner: string, ttlMs: number): Promise<boolean> {
    return this.atomic.renew(runnerKey(runId), owner, ttlMs);
  }

  async releaseRunner(runId: string, owner: string): Promise<void> {
    await this.atomic.deleteIf(runnerKey(runId), owner);
  }

  /** True when `err` says the store could not be reached: nothing refused the write, it may be tried again. */
  unreachable(err: unknown): boolean {
    return unreachableDependency(err) !== undefined;
  }

  /**
   * Moves a run to a terminal state, once: of two endings racing (a cancel and
   * a crash recovery, two replicas) one writes the row, run.ended, the releases
   * and the webhook, and the other returns the stored run.
   */
  async end(r: RunRecord, outcome: RunOutcome): Promise<RunRecord> {
    const now = new Date().toISOString();
    const { status, haltClass = null, error = null } = outcome;
    const ended: RunRecord = {
      ...r,
      status,
      phase: haltClass ? 'halted' : 'finished',
      halt_class: haltClass,
      failure_help: haltClass ? failureHelp(r.run_id, haltClass, outcome.retriesSpent ?? 0, outcome.cause) : null,
      error,
      summary: outcome.summary ?? r.summary,
      steps: outcome.steps ?? r.steps,
      unknown_placeholder_row_count: outcome.unknownPlaceholderRows ?? r.unknown_placeholder_row_count,
      ...(outcome.extractionCounts ?? r.extraction_counts ? { extraction_counts: outcome.extractionCounts ?? r.extraction_counts } : {}),
      resume_step: status === 'succeeded' ? null : (outcome.resumeStep ?? r.start_step ?? 0),
      cost_usd: outcome.costUsd ?? r.cost_usd ?? 0,
      updated_at: now,
      ended_at: now,
      events: [...r.events, `${now} status ${status}${haltClass ? ` (halt_class ${haltClass})` : ''}`],
    };
    const endedEvent = eventOf(r, 'run.ended', { status, phase: ended.phase, halt_class: haltClass, error });
    const current = async () => (await this.runs.get(r.run_id)) ?? ended;
    if (this.events.appendIfUnended) {
      // the terminal row, run.ended and the webhook's outbox item in one commit: whoever sees the run
      // ended finds the event, a crash cannot lose the webhook, and one ending wins
      const webhook = r.webhook ? outboxItem(r.run_id, r.webhook, completionPayload(ended)) : undefined;
      if (!(await this.events.appendIfUnended(ended, endedEvent, webhook))) return current();
      if (webhook) this.webhooks.added();
      await this.releaseHolds(r);
    } else {
      // memory (tests): putUnlessEnded is a check then a write, so two endings can both pass it;
      // one claim on the run's ending picks the one that appends run.ended and sends the webhook.
      // The releases come last: a crash before them costs nothing (the take-back at the next acceptance)
      if (!(await this.runs.putUnlessEnded(ended))) return current();
      if ((await this.atomic.claim(endingKey(r.run_id), ended.status, ENDING_CLAIM_MS)) !== null) return current();
      await this.events.append(endedEvent);
      if (r.webhook) await this.webhooks.deliver(r.run_id, r.webhook, completionPayload(ended));
      await this.releaseHolds(r);
    }
    return ended;
  }

  /** Frees an ended run's concurrency slot and profile lock. */
  private async releaseHolds(r: RunRecord): Promise<void> {
    await this.limits.releaseRunSlot(r.tenant_id, r.run_id);
    // the record's profile_id is already the tenant's (tenant/profile), as profileKey makes it;
    // a run still saving its profile keeps the lock: the save releases it once stored
    if (r.profile_id && (await this.atomic.get(profileSavingKey(r.run_id))) === null) await this.atomic.deleteIf(profileLockKey(r.profile_id), r.run_id);
  }

  /**
   * True when the run's row says it ended: its slot or lock is free to take even
   * if the ending did not get to release it (a crash between the ending's write
   * and the release, or a caller faster than the release).
   */
  private readonly endedHolder = async (runId: string, tenantId: string): Promise<boolean> => {
    const row = await this.runs.view(runId);
    if (row === undefined) {
      // a holder that is no run: another kind that shares the slots (a browser session) answers for its own
      for (const check of this.holderChecks) if (await check(tenantId, runId)) return true;
      return false;
    }
    // an ended run still saving its profile holds on until the newest version is stored
    return TERMINAL.has(row.status as RunStatus) && (await this.atomic.get(profileSavingKey(runId))) === null;
  };

  /** Appends one webhook attempt to the run's delivery log. */
  async recordDelivery(runId: string, attempt: DeliveryAttempt): Promise<void> {
    const r = await this.runs.get(runId);
    // a delivery during the run (a takeover's link) is not written on the row its runner owns: that write would undo the runner's
    if (!r || !TERMINAL.has(r.status)) return;
    await this.runs.put({ ...r, webhook_deliveries: [...r.webhook_deliveries, attempt] });
  }

  history(runId: string, after?: number) {
    return this.events.history(runId, after);
  }

  subscribe(topic: string, listener: Parameters<EventLog['subscribe']>[1]) {
    return this.events.subscribe(topic, listener);
  }
}

/** The Standard Webhooks payload of a run that ended. */
export function completionPayload(r: RunRecord) {
  return {
    type: `run.${r.status}`,
    timestamp: r.ended_at ?? new Date().toISOString(),
    data: {
      run_id: r.run_id,
      status: r.status,
      phase: r.phase,
      halt_class: r.halt_class,
      error: r.error,
      summary: r.summary,
      result_url: `/v1/runs/${r.run_id}/result`,
    },
  };
}
