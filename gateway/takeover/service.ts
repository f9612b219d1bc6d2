// The takeover service (issue 42): a run that asks for a person gets a record in the
// store of record and a one-time link; any replica serves the link (claim, status,
// Done, Fail) and the run's owner, polling the store, sees the answer. Only hashes
// of the link's token and of the claim secret are stored. Each takeover ends once:
// its ending is a claim-once key (`takeover-end:<id>`) whose value is the ending
// itself, so of a Done, an expiry and a cancel racing on two replicas one wins, and
// a replica that died between that claim and the record's write is finished by the
// next read. Expiry is enforced by the owner's poll and by every read.
import type { PlaneRef } from './plane-call.ts';
import type { LiveTarget } from './live-target.ts';
import { timingSafeEqual } from 'node:crypto';
import { sleep } from '../../shared/abort.ts';
import { badRequest, conflict, gone, notFound } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { Backend, HumanAnswer, HumanReason } from '../plugins/contract.ts';
import type { AtomicOps } from '../state/atomic.ts';
import type { KeyedStore } from '../state/tables.ts';
import {
  MAX_INPUT_NOTES,
  TAKEOVER_ENDED,
  TAKEOVER_ID,
  TAKEOVER_SECRET,
  inputNote,
  newTakeoverId,
  newTakeoverSecret,
  secretHash,
  takeoverKey,
  type InputNote,
  type TakeoverRecord,
  type TakeoverStatus,
} from './records.ts';

/** How long the claim-once keys outlive a takeover's expiry (a late Done still finds the ending). */
const KEEP_MS = 24 * 3600_000;
const NOTE_MAX = 2000;
const MESSAGE_MAX = 2000;

export interface TakeoverOptions {
  store: KeyedStore<TakeoverRecord>;
  /** `link:<hash>`, `id:<takeover id>` and `run:<tenant>/<run id>` -> the record's key */
  index: KeyedStore<string>;
  atomic: AtomicOps;
  /** SERVICE_TAKEOVER_SECONDS */
  defaultSeconds: number;
  /** SERVICE_TAKEOVER_MAX_SECONDS */
  maxSeconds: number;
  /** where links point: SERVICE_PUBLIC_URL, else the gateway's own address */
  baseUrl: () => string;
  /** sends the run's signed webhook (the runs' own target), when the run has one */
  webhook?: (runId: string, payload: Record<string, unknown>) => Promise<void>;
  log: Logger;
  /** how often a waiting run reads its takeover */
  pollMs?: number;
}

export interface TakeoverAsk {
  run_id: string;
  tenant_id: string;
  reason: HumanReason;
  message: string;
  step_path: string;
  backend: Backend;
  endpoint: { url: string; token: string } | null;
  viewport: { width: number; height: number } | null;
  timeoutSeconds?: number;
  /** the run's own lease's endpoint (with the agent's secret), while this replica holds the run */
  live?: () => LiveEndpoint | undefined;
  /** an operator's takeover: the key that asked */
  requested_by?: { key_id: string; tenant_id: string };
}

/** Where the plane is, as a relay connects to it: the agent's secret and CA only when this replica holds the run (local agents' secrets are per agent); elsewhere the relay adds the fleet's, as the sessions' relay does. */
export type LiveEndpoint = PlaneRef;

/** The ending a claim-once key holds. */
interface Ending {
  status: TakeoverStatus;
  by: string;
  note: string | null;
  at: string;
}

const sameHash = (a: string, b: string | null): boolean => b !== null && a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));
const expired = (r: TakeoverRecord, now = Date.now()): boolean => Date.parse(r.expires_at) <= now;

export class TakeoverService {
  /** noteInput's writes, one after another per takeover */
  private readonly noting = new Map<string, Promise<void>>();
  /** the owner's lease endpoints of the takeovers whose runs this replica holds, until they end */
  private readonly held = new Map<string, () => LiveEndpoint | undefined>();

  constructor(private readonly o: TakeoverOptions) {}

  /** Creates the record (waiting) and its link; sends the run's webhook with the link. */
  async request(a: TakeoverAsk): Promise<{ record: TakeoverRecord; link: string }> {
    const seconds = Math.max(1, Math.min(Math.round(a.timeoutSeconds ?? this.o.defaultSeconds), this.o.maxSeconds));
    const token = newTakeoverSecret();
    const now = new Date();
    const r: TakeoverRecord = {
      takeover_id: newTakeoverId(),
      run_id: a.run_id,
      tenant_id: a.tenant_id,
      reason: a.reason,
      message: a.message.slice(0, MESSAGE_MAX),
      step_path: a.step_path,
      backend: a.backend,
      status: 'waiting',
      created_at: now.toISOString(),
      expires_at: new Date(now.getTime() + seconds * 1000).toISOString(),
      opened_at: null,
      ended_at: null,
      link_hash: secretHash(token),
      claim_hash: null,
      by: null,
      note: null,
      endpoint: a.endpoint,
      viewport: a.viewport,
      ...(a.requested_by ? { requested_by: a.requested_by } : {}),
      inputs: [],
      input_count: 0,
    };
    const key = takeoverKey(r.tenant_id, r.takeover_id);
    // the record before its indexes: an index never points at nothing
    await this.o.store.set(key, r);
    await this.o.index.set(`link:${r.link_hash}`, key);
    await this.o.index.set(`id:${r.takeover_id}`, key);
    await this.o.index.set(`run:${r.tenant_id}/${r.run_id}`, key);
    if (a.live) this.held.set(r.takeover_id, a.live);
    const link = `${this.o.baseUrl()}/ui/takeover#${token}`;
    if (this.o.webhook) {
      const payload = { type: 'run.takeover_requested', timestamp: r.created_at, data: { run_id: r.run_id, takeover_id: r.takeover_id, reason: r.reason, message: r.message, expires_at: r.expires_at, link } };
      await this.o.webhook(r.run_id, payload).catch((err: unknown) => this.o.log.warn({ run_id: r.run_id, err: (err as Error).message }, 'takeover webhook not queued'));
    }
    return { record: r, link };
  }

  /** The link's claim: once, by the first browser that opens it; 404 unknown, 410 expired or ended, 409 claimed already. */
  async claim(token: unknown): Promise<{ record: TakeoverRecord; claim: string }> {
    if (typeof token !== 'string' || !TAKEOVER_SECRET.test(token)) throw badRequest('token: must be the 43-character token after the # of the takeover link', 'token');
    const key = await this.o.index.get(`link:${secretHash(token)}`);
    const found = key ? await this.read(key) : undefined;
    if (!found) throw notFound('no takeover has this link');
    this.refuseEnded(found);
    const claim = newTakeoverSecret();
    const claimHash = secretHash(claim);
    const held = await this.o.atomic.claim(`takeover-claim:${found.takeover_id}`, claimHash, this.keepMs(found));
    if (held !== null) throw conflict('this takeover link was already opened in another browser; a link works once');
    const opened: TakeoverRecord = { ...found, status: 'opened', opened_at: new Date().toISOString(), claim_hash: claimHash };
    await this.o.store.set(key!, opened);
    // an ending that landed between the read and the write wins: the record says so again
    const after = await this.read(key!);
    if (!after || TAKEOVER_ENDED.has(after.status)) {
      this.refuseEnded(after ?? opened);
    }
    return { record: opened, claim };
  }

  /** The takeover a claim holder may act on: 404 for an unknown id or a claim that does not match (no oracle), 410 once ended. */
  async holder(takeoverId: unknown, claim: unknown): Promise<TakeoverRecord> {
    const r = await this.byClaim(takeoverId, claim);
    if (!r) throw notFound('no takeover with this id and claim');
    return r;
  }

  /** The person's Done or Fail; answers the record as ended. */
  async answer(takeoverId: unknown, claim: unknown, outcome: 'done' | 'failed', note: unknown): Promise<TakeoverRecord> {
    if (note !== undefined && note !== null && typeof note !== 'string') throw badRequest('note: must be a string', 'note');
    const r = await this.holder(takeoverId, claim);
    this.refuseEnded(r);
    const ended = await this.end(r, outcome, 'link', typeof note === 'string' && note.trim() !== '' ? note.slice(0, NOTE_MAX) : null);
    if (ended.status !== outcome) this.refuseEnded(ended);
    return ended;
  }

  /**
   * For the live-screen socket (the relay), on every connect: where the run's plane is,
   * or null unless the takeover is opened, unexpired and the claim's hash matches.
   */
  async target(takeoverId: string, claim: string): Promise<LiveTarget | null> {
    const r = await this.byClaim(takeoverId, claim).catch(() => undefined);
    if (!r || r.status !== 'opened' || expired(r) || !r.endpoint || !r.viewport) return null;
    const own = this.held.get(r.takeover_id)?.();
    return { endpoint: own ? { url: own.url, token: own.token, ...(own.secret ? { secret: own.secret } : {}), ...(own.ca ? { ca: own.ca } : {}) } : r.endpoint, backend: r.backend, viewport: r.viewport };
  }

  /** Appends what the relay saw of one input (kind, place, key names, typed text as its length only). */
  noteInput(takeoverId: string, summary: Partial<Omit<InputNote, 'at'>> & Record<string, unknown>): Promise<void> {
    const note = inputNote(summary);
    const prev = this.noting.get(takeoverId) ?? Promise.resolve();
    const next = prev
      .then(async () => {
        const key = TAKEOVER_ID.test(takeoverId) ? await this.o.index.get(`id:${takeoverId}`) : undefined;
        const r = key ? await this.o.store.get(key) : undefined;
        if (!r || TAKEOVER_ENDED.has(r.status)) return;
        const inputs = r.inputs ?? [];
        await this.o.store.set(key!, { ...r, inputs: inputs.length < MAX_INPUT_NOTES ? [...inputs, note] : inputs, input_count: (r.input_count ?? inputs.length) + 1 });
      })
      .catch((err: unknown) => this.o.log.warn({ takeover_id: takeoverId, err: (err as Error).message }, 'takeover input not noted'))
      .finally(() => {
        if (this.noting.get(takeoverId) === next) this.noting.delete(takeoverId);
      });
    this.noting.set(takeoverId, next);
    return next;
  }

  /** A tenant's current or last takeover of a run; undefined for none (or another tenant's run). */
  async forRun(tenantId: string, runId: string): Promise<TakeoverRecord | undefined> {
    const key = await this.o.index.get(`run:${tenantId}/${runId}`);
    const r = key ? await this.read(key) : undefined;
    return r && r.tenant_id === tenantId ? r : undefined;
  }

  /** Ends the run's open takeover, if any (`cancelled`, by `run`): its run ended without its runner (recovery). */
  async runEnded(tenantId: string, runId: string): Promise<void> {
    const r = await this.forRun(tenantId, runId);
    if (r && !TAKEOVER_ENDED.has(r.status)) await this.end(r, 'cancelled', 'run');
  }

  /**
   * The run's owner waits here for the answer: the store is read every pollMs, so an
   * answer any replica wrote is seen. The signal ends the wait (the caller ends the
   * takeover `cancelled`).
   */
  async wait(r: TakeoverRecord, signal: AbortSignal): Promise<TakeoverRecord> {
    const key = takeoverKey(r.tenant_id, r.takeover_id);
    for (;;) {
      const now = await this.read(key);
      if (!now) throw new Error('the takeover record is gone from the store');
      if (TAKEOVER_ENDED.has(now.status)) {
        this.held.delete(now.takeover_id);
        return now;
      }
      await sleep(Math.min(this.o.pollMs ?? 250, Math.max(10, Date.parse(now.expires_at) - Date.now())), signal);
    }
  }

  /** Ends the takeover as `status` unless it has ended already; answers the record as it ended (this ending or the earlier one). */
  async end(r: TakeoverRecord, status: TakeoverStatus, by: string, note: string | null = null): Promise<TakeoverRecord> {
    const key = takeoverKey(r.tenant_id, r.takeover_id);
    const ending: Ending = { status, by, note, at: new Date().toISOString() };
    const won = (await this.o.atomic.claim(`takeover-end:${r.takeover_id}`, JSON.stringify(ending), this.keepMs(r))) === null;
    if (!won) return (await this.read(key)) ?? r;
    return this.written(key, ending);
  }

  /** The whole answer of an ended record, as the runner's askHuman resolves it. */
  static answerOf(r: TakeoverRecord): HumanAnswer {
    const waited = Date.parse(r.ended_at ?? new Date().toISOString()) - Date.parse(r.created_at);
    return { outcome: r.status === 'done' ? 'done' : r.status === 'failed' ? 'failed' : r.status === 'cancelled' ? 'cancelled' : 'expired', ...(r.note ? { note: r.note } : {}), ...(r.by ? { by: r.by } : {}), waited_ms: Math.max(0, waited) };
  }

  /** Reads a record, finishing an ending whose writer died and ending an expired one (every read enforces expiry). */
  private async read(key: string): Promise<TakeoverRecord | undefined> {
    const r = await this.o.store.get(key);
    if (!r || TAKEOVER_ENDED.has(r.status)) return r;
    const claimed = await this.o.atomic.get(`takeover-end:${r.takeover_id}`);
    if (claimed) return this.written(key, JSON.parse(claimed) as Ending);
    if (expired(r)) return this.end(r, 'expired', 'timeout');
    return r;
  }

  private async written(key: string, e: Ending): Promise<TakeoverRecord> {
    const r = await this.o.store.get(key);
    if (r) this.held.delete(r.takeover_id);
    if (!r) throw new Error('the takeover record is gone from the store');
    if (TAKEOVER_ENDED.has(r.status)) return r;
    const ended: TakeoverRecord = { ...r, status: e.status, by: e.by, note: e.note, ended_at: e.at, endpoint: null };
    await this.o.store.set(key, ended);
    return ended;
  }

  private async byClaim(takeoverId: unknown, claim: unknown): Promise<TakeoverRecord | undefined> {
    if (typeof takeoverId !== 'string' || !TAKEOVER_ID.test(takeoverId) || typeof claim !== 'string' || !TAKEOVER_SECRET.test(claim)) return undefined;
    const key = await this.o.index.get(`id:${takeoverId}`);
    const r = key ? await this.read(key) : undefined;
    return r && sameHash(secretHash(claim), r.claim_hash) ? r : undefined;
  }

  private refuseEnded(r: TakeoverRecord): void {
    if (r.status === 'expired') throw gone('this takeover link has expired: nobody took over in time and the run went on without a person');
    if (TAKEOVER_ENDED.has(r.status)) throw gone(`this takeover has ended (${r.status}); the link no longer works`);
  }

  private keepMs(r: TakeoverRecord): number {
    return Math.max(60_000, Date.parse(r.expires_at) - Date.now()) + KEEP_MS;
  }
}
