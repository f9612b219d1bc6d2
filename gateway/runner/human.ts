// The run's wait for a person (issue 42): a step, an anti-bot verdict or the brain
// asked for help. The run shows phase awaiting_human, keeps its plane, lease (the
// executor's heartbeat goes on) and recording, and its clock (time cap, step limit)
// stops. A takeover record and its one-time link are made through the desk (the
// takeover service); the run's owner then polls the store for the answer. Done: the
// step goes on. Fail: the run halts human_failed with the person's note. Expiry: it
// halts human_timeout. A cancel, the time cap or a lost plane end the takeover `cancelled`.
import type { HumanAnswer, HumanRequest, StepContext } from '../plugins/contract.ts';
import type { RunRecord } from '../runs/records.ts';
import type { RunClock } from './clock.ts';
import { TAKEOVER_ENDED, inputCounts, type InputNote } from '../takeover/records.ts';
import { Halt } from './outcome.ts';
import type { PlaneEndpoint } from './planes.ts';
import type { RunRecording } from './recording.ts';

/** A takeover as the runner sees it (gateway/takeover/records.ts has the whole record). */
export interface DeskTakeover {
  takeover_id: string;
  tenant_id: string;
  reason?: string;
  /** an operator's takeover: the key that asked (never the token) */
  requested_by?: { key_id: string; tenant_id: string } | null;
  created_at: string;
  expires_at: string;
  opened_at: string | null;
  ended_at: string | null;
  status: string;
  by: string | null;
  note: string | null;
  inputs?: InputNote[];
  input_count?: number;
}

/** What the runner needs of the takeover service (it implements this). */
export interface TakeoverDesk {
  request(a: {
    run_id: string;
    tenant_id: string;
    reason: HumanRequest['reason'];
    message: string;
    step_path: string;
    backend: 'computer_plane' | 'dom_plane';
    endpoint: { url: string; token: string } | null;
    viewport: { width: number; height: number } | null;
    timeoutSeconds?: number;
    /** the lease's own endpoint (with the agent's secret) while this runner holds the run: a relay on this replica uses it */
    live?: () => PlaneEndpoint | undefined;
  }): Promise<{ record: DeskTakeover; link: string }>;
  wait(r: DeskTakeover, signal: AbortSignal): Promise<DeskTakeover>;
  end(r: DeskTakeover, status: 'cancelled', by: string): Promise<DeskTakeover>;
  /** the run's current or last takeover (an operator's is made by a route, on any replica) */
  forRun(tenantId: string, runId: string): Promise<DeskTakeover | undefined>;
}

/** Where a running run's page is published for its live screen and an operator's takeover (gateway/takeover/run-live.ts). */
export interface LiveRuns {
  publish(a: { run_id: string; tenant_id: string; backend: 'computer_plane' | 'dom_plane'; endpoint: PlaneEndpoint; viewport?: { width: number; height: number } | null; local?: () => PlaneEndpoint | undefined }): Promise<void>;
  withdraw(tenantId: string, runId: string): Promise<void>;
}

export interface HumanSide {
  desk: TakeoverDesk;
  clock: RunClock;
  signal: AbortSignal;
  run(): RunRecord;
  /** saves the run (phase) and emits its event, fenced by the lease */
  saveAndEmit(r: RunRecord, type: string, data: Record<string, unknown>): Promise<void>;
  emit(type: string, data: Record<string, unknown>): Promise<void>;
  endpoint(): PlaneEndpoint | undefined;
  viewport(): Promise<{ width: number; height: number } | null>;
  /** the page now, as PNG, for the trace (undefined when it cannot be had within a few seconds) */
  png(): Promise<Buffer | undefined>;
  rec?: RunRecording;
  /** the trace index of the step that asked */
  traceIndex(): number;
  log(line: string): void;
  /** operator takeovers this run has waited for or reported already */
  handled: Set<string>;
  /** when the store is read for an operator's takeover */
  operator: OperatorWatch;
}

/** How often a run reads the store for an operator's takeover when no event said there is one. */
export const OPERATOR_RECHECK_MS = 10_000;

/**
 * Whether a run should look for an operator's takeover before its next step. The
 * request's `takeover_requested` event (reason operator) reaches the run's subscribers on
 * every replica, so the store is read when it came, not before every step. Read also:
 * before the first step (one asked before this runner took the run, as a recovered run
 * on another replica), and every OPERATOR_RECHECK_MS (an event lost between replicas).
 */
export class OperatorWatch {
  private asked = true;
  private readAt = 0;

  constructor(private readonly now: () => number = Date.now) {}

  /** The run's event said an operator asked. */
  heard(): void {
    this.asked = true;
  }

  /** True when the store should be read now; it is then counted as read (an event heard during the read asks again). */
  due(): boolean {
    if (!this.asked && this.now() - this.readAt < OPERATOR_RECHECK_MS) return false;
    this.asked = false;
    this.readAt = this.now();
    return true;
  }
}

/** What a step's context gets of the run's takeover: askHuman and the runtime switches that call it. */
export function humanFields(h: HumanSide | undefined, runtime: Record<string, unknown>, path: string): Pick<StepContext, 'askHuman' | 'onChallenge' | 'brainMayAskHuman'> {
  if (!h) return {};
  return { askHuman: (req) => askHuman(h, path, req), onChallenge: runtime.on_challenge === 'ask_human' ? 'ask_human' : 'halt', brainMayAskHuman: runtime.brain_may_ask_human === true };
}

/** Asks a person on behalf of the step at `path`; resolves on Done, throws the run's halt otherwise. */
export async function askHuman(h: HumanSide, path: string, req: HumanRequest): Promise<HumanAnswer> {
  if (h.signal.aborted) throw h.signal.reason;
  const run = h.run();
  const ep = h.endpoint();
  const message = (req.message || 'a person is asked to act on the page').slice(0, 2000);
  const { record, link } = await h.desk.request({
    run_id: run.run_id,
    tenant_id: run.tenant_id,
    reason: req.reason,
    message,
    step_path: path,
    backend: run.runtime.compute_backend,
    endpoint: ep ? { url: ep.url, token: ep.token } : null,
    viewport: await h.viewport(),
    live: h.endpoint,
    ...(req.timeoutSeconds !== undefined ? { timeoutSeconds: req.timeoutSeconds } : {}),
  });
  h.clock.hold();
  const t0 = Date.now();
  let ended: DeskTakeover | undefined;
  const shots = shooter(h);
  try {
    h.log(`${path} waiting for a person (${req.reason}): takeover ${record.takeover_id} until ${record.expires_at}`);
    await h.saveAndEmit({ ...h.run(), phase: 'awaiting_human' }, 'run.status', { status: 'running', phase: 'awaiting_human', takeover_id: record.takeover_id });
    await h.emit('takeover_requested', { takeover_id: record.takeover_id, path, reason: req.reason, message, expires_at: record.expires_at, link });
    try {
      ended = await h.desk.wait(record, h.signal);
    } catch (err) {
      // a cancel, the time cap, a lost plane or a lost lease: the person's link stops working
      ended = await h.desk.end(record, 'cancelled', 'run').catch(() => undefined);
      throw err;
    }
  } finally {
    h.clock.release();
    if (ended) await report(h, path, ended, Date.now() - t0, await shots.after()).catch(() => undefined);
  }
  if (ended.status === 'done') {
    await h.saveAndEmit({ ...h.run(), phase: 'running' }, 'run.status', { status: 'running', phase: 'running' });
    return { outcome: 'done', ...(ended.note ? { note: ended.note } : {}), ...(ended.by ? { by: ended.by } : {}), waited_ms: Date.now() - t0 };
  }
  if (ended.status === 'failed') {
    const note = ended.note ? `: ${JSON.stringify(ended.note)}` : ' (no note)';
    throw new Halt('human_failed', `the person who took over ${path} pressed Fail${note}`, null, `the person who took over pressed Fail${note}`);
  }
  if (ended.status === 'cancelled') throw h.signal.aborted ? h.signal.reason : new Halt('cancelled', 'the takeover was cancelled');
  const seconds = Math.round((Date.parse(record.expires_at) - Date.parse(record.created_at)) / 1000);
  throw new Halt('human_timeout', `nobody took over ${path} before the link expired (${seconds} s)`, 'timeout', `nobody took over in time: the takeover link expired after ${seconds} s${ended.opened_at ? ' (it was opened, but neither Done nor Fail was pressed)' : ' without being opened'}`);
}

/**
 * Before each step: an operator asked to take the run over (POST /v1/runs/{id}/takeover, any
 * replica) and the run has not seen it yet (the store is read only when OperatorWatch says). It waits for them as for a person it asked itself;
 * the operator's page got the relay at once, so inputs made during the step before count too.
 * Done or expiry: the run goes on (it did not need them). Fail: it halts human_failed.
 */
export async function operatorPause(h: HumanSide, path: string): Promise<void> {
  if (!h.operator.due()) return;
  const run = h.run();
  const t = await h.desk.forRun(run.tenant_id, run.run_id).catch(() => undefined);
  if (!t || t.reason !== 'operator' || h.handled.has(t.takeover_id)) return;
  h.handled.add(t.takeover_id);
  const t0 = Date.now();
  let ended: DeskTakeover | undefined = TAKEOVER_ENDED.has(t.status as never) ? t : undefined;
  // the operator's page had the relay since the request: "before" is the page when the run stopped for them
  const shots = shooter(h);
  if (!ended) {
    h.clock.hold();
    try {
      h.log(`${path} waiting for an operator: takeover ${t.takeover_id} until ${t.expires_at}`);
      await h.saveAndEmit({ ...h.run(), phase: 'awaiting_human' }, 'run.status', { status: 'running', phase: 'awaiting_human', takeover_id: t.takeover_id });
      try {
        ended = await h.desk.wait(t, h.signal);
      } catch (err) {
        ended = await h.desk.end(t, 'cancelled', 'run').catch(() => undefined);
        throw err;
      }
    } finally {
      h.clock.release();
      if (ended) await report(h, path, ended, Date.now() - t0, await shots.after()).catch(() => undefined);
    }
    await h.saveAndEmit({ ...h.run(), phase: 'running' }, 'run.status', { status: 'running', phase: 'running' });
  } else await report(h, path, ended, 0, await shots.after()).catch(() => undefined);
  if (ended.status === 'failed') {
    const note = ended.note ? `: ${JSON.stringify(ended.note)}` : ' (no note)';
    throw new Halt('human_failed', `the operator who took over before ${path} pressed Fail${note}`, null, `the operator who took over pressed Fail${note}`);
  }
  if (ended.status === 'cancelled' && h.signal.aborted) throw h.signal.reason;
}

/** The trace's screenshots of a takeover: the page as the person got it (taken now) and as they left it (after()). */
function shooter(h: HumanSide): { after(): Promise<{ before?: Buffer; after?: Buffer }> } {
  if (h.rec?.wantsScreenshots !== true || !h.rec.interventionShots) return { after: async () => ({}) };
  const before = h.png().catch(() => undefined);
  return {
    after: async () => {
      const [b, a] = await Promise.all([before, h.png().catch(() => undefined)]);
      return { ...(b ? { before: b } : {}), ...(a ? { after: a } : {}) };
    },
  };
}

/** takeover_ended on the run's events and an intervention in its trace (with the page before and after the person). */
async function report(h: HumanSide, path: string, t: DeskTakeover, waitedMs: number, shots: { before?: Buffer; after?: Buffer } = {}): Promise<void> {
  const inputs = inputCounts(t);
  const duration = t.opened_at && t.ended_at ? Math.max(0, Date.parse(t.ended_at) - Date.parse(t.opened_at)) : 0;
  h.log(`${path} takeover ${t.takeover_id} ended ${t.status} (by ${t.by ?? 'nobody'}) after ${Math.round(waitedMs / 1000)} s, ${inputs.total} input(s)`);
  const index = h.traceIndex();
  h.rec?.interventionShots?.(index, shots);
  h.rec?.decision(index, 'intervention', 'command', `a person took over ${path}: ${t.status}`, {
    takeover_id: t.takeover_id,
    outcome: t.status,
    by: t.by,
    ...(t.requested_by ? { requested_by: t.requested_by } : {}),
    requested_at: t.created_at,
    opened_at: t.opened_at,
    ended_at: t.ended_at,
    duration_ms: duration,
    waited_ms: waitedMs,
    inputs,
    screenshots: { before: Boolean(shots.before), after: Boolean(shots.after) },
  });
  await h.emit('takeover_ended', { takeover_id: t.takeover_id, path, outcome: t.status, by: t.by, ...(t.requested_by ? { requested_by: t.requested_by } : {}), opened_at: t.opened_at, ended_at: t.ended_at, duration_ms: duration, waited_ms: waitedMs, inputs });
}
