// Browser sessions people drive with their own code. A session takes one of the
// tenant's run slots (sessions and runs share the concurrency cap), a profile lock when
// it names a profile, and a plane from the same provider runs use; the replica that
// opened the plane owns it (a lease in the shared store) and ends it: on release, idle
// timeout, maximum duration, a lost browser, or its last client leaving when it is not
// kept alive. Any replica reads, lists, releases and relays to it; a session whose
// owner died is taken over by whoever looks next (adoption.ts) while its browser lives,
// else ended (gateway_lost) and its holds freed.
import { stat } from 'node:fs/promises';
import { ServiceError, notFound } from '../errors.ts';
import type { Limits } from '../http/limits.ts';
import type { Tenant } from '../http/tenants.ts';
import type { Logger } from '../log.ts';
import { profileSavingKey, type AtomicOps } from '../state/atomic.ts';
import { describeSave, type ProfileHandle, type ProfileSyncs } from '../runner/profile-sync.ts';
import type { KeyedStore } from '../state/tables.ts';
import type { PlaneEndpoint, PlaneLease, PlaneProvider } from '../runner/planes.ts';
import { callPlane } from '../takeover/plane-call.ts';
import { warmCdpChannel } from '../planes/index.ts';
import { SESSION_ID, newSessionId, pageSessions, sessionKey, type EndReason, type SessionRecord } from './records.ts';
import type { RunRecorder } from '../runner/recording.ts';
import { SessionTrace, type CdpActivity } from './session-trace.ts';
import { claimProfile, openPlane, sessionDemand, startingRecord, type SessionSpec } from './open.ts';
import { adopt, ownerKey, type HeldPlane } from './adoption.ts';
import { SessionClients } from './clients.ts';

import { ownerIsDead } from '../runs/owners.ts';

export type { SessionSpec } from './open.ts';

export interface SessionsDeps {
  store: KeyedStore<SessionRecord>;
  atomic: AtomicOps;
  limits: Limits;
  planes: PlaneProvider;
  log: Logger;
  /** this replica (runs' owner format) */
  owner: string;
  /** the owner lease's time to live; renewed every third of it */
  leaseMs: number;
  /** how long a session may wait for a plane */
  openMs: number;
  /** where a local plane leaves the session's recording (checked after the plane closed) */
  videoFile(tenantId: string, sessionId: string): string;
  /** how often the owner checks its sessions (idle, duration, a release on another replica) */
  tickMs?: number;
  /** records each session's trace (session-trace.ts); none: sessions are not traced */
  recorder?: RunRecorder;
  /** how a replica that did not open a session reaches its agent (the fleet's secret and CA), to adopt it */
  fleet?: () => { secret: string | undefined; ca?: Buffer };
  /** profiles that follow the tenant: loaded into the plane at open, saved at release; absent: the agent's own dir */
  profiles?: ProfileSyncs;
}

/** What the owning replica holds of a live session. */
interface Held {
  record: SessionRecord;
  lease: HeldPlane;
  timer: NodeJS.Timeout;
  renew: NodeJS.Timeout;
  /** when a client was last seen attached (or the session started) */
  activeAt: number;
  attachedOnce: boolean;
  ending?: Promise<SessionRecord>;
  profile?: ProfileHandle;
  trace?: SessionTrace;
  /** the trace being set up (off the create path); the end waits for it */
  tracing?: Promise<unknown>;
}

export class SessionsService {
  private readonly held = new Map<string, Held>();
  /** CDP relays on this replica (its local clients): closed when the session ends */
  private readonly clients: SessionClients;
  /** traces of ended sessions still being written, by session */
  private readonly traceWrites = new Map<string, Promise<unknown>>();
  /** ended sessions whose plane is still closing and profile still saving, by session */
  private readonly closings = new Map<string, Promise<unknown>>();
  /** take-overs under way on this replica, by session */
  private readonly adopting = new Map<string, Promise<SessionRecord>>();
  private closed = false;

  constructor(private readonly d: SessionsDeps) {
    this.clients = new SessionClients(d.atomic);
  }

  async create(tenant: Tenant, spec: SessionSpec): Promise<SessionRecord> {
    if (this.closed) throw new ServiceError('unavailable', 'the gateway is shutting down');
    const id = newSessionId();
    await this.d.limits.acquireRunSlot(tenant, id, (holder) => this.holderEnded(tenant.tenant_id, holder));
    const record = startingRecord(id, tenant.tenant_id, spec, this.d.owner);
    const holds: Array<() => Promise<unknown>> = [() => this.d.limits.releaseRunSlot(tenant.tenant_id, id)];
    const undo = async (): Promise<void> => {
      for (const h of holds.reverse()) await h().catch(() => undefined);
    };
    let renew: NodeJS.Timeout | undefined;
    try {
      if (record.profile_id) {
        const key = `profile:${record.profile_id}`;
        const holder = await claimProfile(this.d.atomic, key, id, (spec.timeout_seconds + 300) * 1000, (h) => this.holderEnded(tenant.tenant_id, h));
        if (holder !== null) throw new ServiceError('profile_busy', `profile '${spec.profile_id}' is busy: ${holder} holds its lock`);
        holds.push(() => this.d.atomic.deleteIf(key, id));
      }
      await this.d.atomic.claim(ownerKey(id), this.d.owner, this.d.leaseMs);
      holds.push(() => this.d.atomic.deleteIf(ownerKey(id), this.d.owner));
      renew = this.renewer(id);
      // the row exists before the plane opens: an acceptance at the cap must see this slot's holder as alive
      await this.d.store.set(sessionKey(tenant.tenant_id, id), record);
      // the stored profile is read and opened beside the plane's placement
      const profile = record.profile_id && this.d.profiles ? this.d.profiles.begin(tenant.tenant_id, record.profile_id, id) : undefined;
      const lease = await openPlane(this.d.planes, { ...(profile ? { profile } : {}), ...sessionDemand(tenant, record, spec) }, this.d.openMs);
      const endpoint = lease.endpoint?.();
      const live: SessionRecord = { ...record, status: 'live', updated_at: new Date().toISOString(), endpoint: endpoint ? { url: endpoint.url, token: endpoint.token } : null };
      await this.d.store.set(sessionKey(tenant.tenant_id, id), live);
      // the channel a client's CDP connection will take, connected while the answer goes back
      if (endpoint) warmCdpChannel(endpoint);
      const held = this.hold(live, lease, renew);
      held.profile = profile;
      held.tracing = this.traceOf(live, lease).then((t) => (held.trace = t)).catch(() => undefined);
      this.d.log.info({ session_id: id, tenant_id: tenant.tenant_id, backend: spec.compute_backend }, 'session live');
      return live;
    } catch (err) {
      if (renew) clearInterval(renew);
      const ended: SessionRecord = { ...record, status: 'ended', end_reason: 'start_failed', detail: (err as Error).message.slice(0, 300), ended_at: new Date().toISOString(), updated_at: new Date().toISOString() };
      await this.d.store.set(sessionKey(tenant.tenant_id, id), ended).catch(() => undefined);
      await undo();
      if (err instanceof ServiceError) throw err;
      throw new ServiceError('unavailable', `the session's browser could not start: ${(err as Error).message.slice(0, 300)}`, { 'Retry-After': '5' });
    }
  }

  /** Keeps the owner lease of `id` alive while this replica holds it. */
  private renewer(id: string): NodeJS.Timeout {
    const t = setInterval(() => void this.keepLease(id), Math.max(250, Math.floor(this.d.leaseMs / 3)));
    t.unref();
    return t;
  }

  /**
   * One beat of the owner lease. A lease found gone (Redis restarted and kept nothing, or it
   * expired while the store was away) is taken again; when another replica adopted the
   * session meanwhile, this one lets go of it without closing its plane.
   */
  private async keepLease(id: string): Promise<void> {
    const key = ownerKey(id);
    const renewed = await this.d.atomic.renew(key, this.d.owner, this.d.leaseMs).catch(() => undefined);
    if (renewed !== false) return; // renewed, or the store is away: the next beat tries again
    const holder = await this.d.atomic.claim(key, this.d.owner, this.d.leaseMs).catch(() => undefined);
    const h = this.held.get(id);
    if (holder === null || holder === undefined || holder === this.d.owner || !h || h.ending) return;
    clearInterval(h.timer);
    clearInterval(h.renew);
    void h.trace?.last();
    this.held.delete(id);
    this.d.log.warn({ session_id: id, tenant_id: h.record.tenant_id }, 'session let go: another replica owns it now');
  }

  /** From now on this replica is the session's owner: it ticks, and ends the session when its plane is lost. */
  private hold(record: SessionRecord, lease: HeldPlane, renew: NodeJS.Timeout): Held {
    const id = record.session_id;
    const held: Held = { record, lease, renew, activeAt: Date.now(), attachedOnce: false, timer: setInterval(() => void this.tick(id), this.d.tickMs ?? 1000) };
    held.timer.unref();
    this.held.set(id, held);
    void lease.lost.then((why) => this.end(id, 'browser_lost', why));
    return held;
  }

  /**
   * A live session whose owner is gone: taken over here while its agent still holds it
   * (its clients stay connected; the trace the dead owner was writing ends with it), else
   * ended gateway_lost. Answers the session's row as it now is.
   */
  private takeOver(r: SessionRecord): Promise<SessionRecord> {
    const id = r.session_id;
    const under = this.adopting.get(id);
    if (under) return under;
    const p = (async (): Promise<SessionRecord> => {
      const fleet = this.d.fleet?.() ?? { secret: undefined };
      const a = this.closed ? { kind: 'gone' as const, why: 'the gateway is shutting down' } : await adopt(r, { atomic: this.d.atomic, owner: this.d.owner, leaseMs: this.d.leaseMs, fleet });
      if (a.kind === 'taken') return (await this.d.store.get(sessionKey(r.tenant_id, id))) ?? r;
      if (a.kind === 'gone') return this.markOrphanEnded(r);
      const renew = this.renewer(id);
      const now = new Date().toISOString();
      const current = (await this.d.store.get(sessionKey(r.tenant_id, id)).catch(() => undefined)) ?? r;
      const mine: SessionRecord = { ...current, owner: this.d.owner, updated_at: now };
      // its idle time counts from now, and its clients from the next tick (wherever they are relayed)
      this.hold(mine, a.plane, renew);
      if (current.status === 'ended') {
        void this.end(id, current.end_reason ?? 'released', current.detail ?? 'ended');
        return current;
      }
      await this.d.store.set(sessionKey(r.tenant_id, id), mine);
      this.d.log.warn({ session_id: id, tenant_id: r.tenant_id }, 'session adopted: the replica that held it is gone');
      return mine;
    })().finally(() => this.adopting.delete(id));
    this.adopting.set(id, p);
    return p;
  }

  /** The session's trace, when sessions are recorded; a recorder that cannot start leaves the session untraced. */
  private async traceOf(r: SessionRecord, lease: PlaneLease): Promise<SessionTrace | undefined> {
    const subject = { run_id: r.session_id, tenant_id: r.tenant_id, created_at: r.created_at, cua_model: '', runtime: { compute_backend: r.compute_backend } };
    const recording = await this.d.recorder?.begin(subject, { staged: false }).catch(() => undefined);
    if (!recording) return undefined;
    const activity = async () => (await this.planeCall(r, { secret: undefined }, 'cdp/activity', 'GET')).body as unknown as CdpActivity;
    return new SessionTrace({ recording, plane: lease.plane, activity });
  }

  /** The tenant's session, or 404 (another tenant's session is indistinguishable from none). A live one whose owner died is taken over (or ended) here. */
  async get(tenant: Tenant, id: string): Promise<SessionRecord> {
    if (!SESSION_ID.test(id)) throw notFound('no such session');
    const r = await this.d.store.get(sessionKey(tenant.tenant_id, id));
    if (!r || r.tenant_id !== tenant.tenant_id) throw notFound('no such session');
    return this.look(r);
  }

  /** `r` as it is once looked at: a live session whose owner died is taken over here (or ended). */
  async look(r: SessionRecord): Promise<SessionRecord> {
    if (r.status !== 'ended' && !this.held.has(r.session_id) && (await this.ownerGone(r))) return this.takeOver(r);
    return r;
  }

  async list(tenant: Tenant, limit: number, cursor: string | undefined): Promise<{ items: SessionRecord[]; next_cursor: string | null }> {
    const prefix = `${tenant.tenant_id}/`;
    const rows: SessionRecord[] = [];
    for (const k of await this.d.store.keys()) {
      if (!k.startsWith(prefix)) continue;
      const r = await this.d.store.get(k);
      if (r && r.tenant_id === tenant.tenant_id) rows.push(r);
    }
    return pageSessions(rows, limit, cursor);
  }

  /** DELETE: ends the session (on its owner; elsewhere the row says so and the owner sees it within a tick). */
  async release(tenant: Tenant, id: string): Promise<SessionRecord> {
    const r = await this.get(tenant, id);
    if (r.status === 'ended') return r;
    if (this.held.has(id)) return this.end(id, 'released', 'released by DELETE');
    const ended = this.endedRecord(r, 'released', 'released by DELETE');
    await this.d.store.set(sessionKey(r.tenant_id, id), ended);
    this.clients.closeAll(id, 'session released');
    return ended;
  }

  /** Where a relay reaches the browser: the owner's own lease, else the row's endpoint with the fleet's secret. */
  endpointOf(r: SessionRecord, fleet: { secret: string | undefined; ca?: Buffer }): PlaneEndpoint | undefined {
    const own = this.held.get(r.session_id)?.lease.endpoint?.();
    if (own) return own;
    return r.endpoint ? { url: r.endpoint.url, token: r.endpoint.token, secret: fleet.secret, ca: fleet.ca } : undefined;
  }

  /**
   * One call of the plane's wire contract on a live session (its downloads), from any
   * replica: a connection of its own to the agent slot, with the session's token.
   */
  async planeCall(r: SessionRecord, fleet: { secret: string | undefined; ca?: Buffer }, method: string, verb: 'GET' | 'POST', body: Record<string, unknown> = {}, idempotent = false): Promise<{ body: Record<string, unknown>; blob?: Buffer }> {
    const ep = r.status === 'live' ? this.endpointOf(r, fleet) : undefined;
    if (!ep) throw new ServiceError('conflict', r.status === 'ended' ? `the session ended (${r.end_reason}); its files went with its browser` : 'the session is still starting');
    return callPlane(ep, method, verb, body, { idempotent, what: "the session's plane agent" });
  }

  /** A relay opened on this replica; returns its detach. `close(why)` is called if the session ends first. */
  attach(r: SessionRecord, close: (why: string) => void): () => void {
    const id = r.session_id;
    const held = this.held.get(id);
    if (held) {
      held.attachedOnce = true;
      held.activeAt = Date.now();
    }
    // not the owner: the owner hears of the client through the shared store, and this replica
    // watches that the owner still is (a session nobody owns would hold its agent slot with no one to end it)
    const detach = this.clients.add(id, close, held ? undefined : () => void (this.held.has(id) ? undefined : this.ownerGone(r).then((gone) => (gone ? this.takeOver(r) : undefined)).catch(() => undefined)));
    return () => {
      const left = detach();
      const h = this.held.get(id);
      if (!h) return;
      h.activeAt = Date.now();
      // the last client left a session that is not kept alive: it ends now
      if (left <= 0 && !h.record.keep_alive) void this.tick(id);
    };
  }

  /** True for a slot or lock holder that is an ended session (or a session row that is gone, or whose owner died). */
  async holderEnded(tenantId: string, holder: string): Promise<boolean> {
    if (!SESSION_ID.test(holder)) return false;
    const r = await this.d.store.get(sessionKey(tenantId, holder));
    // an ended session still saving its profile holds on until the newest version is stored
    if (!r || r.status === 'ended') return (await this.d.atomic.get(profileSavingKey(holder))) === null;
    if (this.held.has(holder)) return false;
    if (!(await this.ownerGone(r))) return false;
    return (await this.takeOver(r)).status === 'ended';
  }

  private async ownerGone(r: SessionRecord): Promise<boolean> {
    if (ownerIsDead(r.owner)) return true;
    return (await this.d.atomic.get(ownerKey(r.session_id))) === null;
  }

  private async markOrphanEnded(r: SessionRecord): Promise<SessionRecord> {
    const ended = this.endedRecord(r, 'gateway_lost', 'the gateway replica that held this session is gone');
    await this.d.store.set(sessionKey(r.tenant_id, r.session_id), ended);
    this.clients.closeAll(r.session_id, ended.detail!);
    await this.d.limits.releaseRunSlot(r.tenant_id, r.session_id).catch(() => undefined);
    if (r.profile_id) await this.d.atomic.deleteIf(`profile:${r.profile_id}`, r.session_id).catch(() => undefined);
    return ended;
  }

  private endedRecord(r: SessionRecord, reason: EndReason, detail: string): SessionRecord {
    const now = new Date().toISOString();
    return { ...r, status: 'ended', end_reason: reason, detail, ended_at: now, updated_at: now };
  }

  /** The owner's check: ended elsewhere (a DELETE on another replica), past its duration, idle, or left by its last client. */
  private async tick(id: string): Promise<void> {
    const h = this.held.get(id);
    if (!h || h.ending) return;
    const now = Date.now();
    if (now >= Date.parse(h.record.expires_at)) return void this.end(id, 'max_duration', `reached timeout_seconds (${h.record.timeout_seconds} s)`);
    const attached = await this.clients.attached(id);
    h.trace?.tick(attached);
    if (attached) {
      h.activeAt = now;
      h.attachedOnce = true;
    } else if (h.attachedOnce && !h.record.keep_alive) {
      return void this.end(id, 'client_disconnected', 'its last CDP client disconnected (keep_alive is false)');
    } else if (now - h.activeAt >= h.record.idle_timeout_seconds * 1000) {
      return void this.end(id, 'idle_timeout', `no CDP client for idle_timeout_seconds (${h.record.idle_timeout_seconds} s)`);
    }
    const row = await this.d.store.get(sessionKey(h.record.tenant_id, id)).catch(() => undefined);
    if (row?.status === 'ended') void this.end(id, row.end_reason ?? 'released', row.detail ?? 'ended');
  }

  /**
   * Ends a session this replica owns: the row first (the store of record says it ended
   * before anything is released), its relays and the tenant's slot, then its plane (the
   * agent closes the browser and keeps the video), and last its profile lock and owner lease.
   * A session whose profile is saved answers once the row says ended: the plane's close
   * and the save follow (closing()), its profile lock held until the new version is stored,
   * as a run's end does; the row gains its video once the plane has closed.
   */
  end(id: string, reason: EndReason, detail: string): Promise<SessionRecord> {
    const h = this.held.get(id);
    if (!h) return Promise.reject(notFound('no such session'));
    h.ending ??= (async () => {
      clearInterval(h.timer);
      // begun now, waited for (LAST_LOOK_MS at most) before the plane closes: it runs beside the writes below
      const lastLook = h.trace?.last();
      const current = await this.d.store.get(sessionKey(h.record.tenant_id, id)).catch(() => undefined);
      // a release written by another replica keeps its reason
      const ended = current?.status === 'ended' ? current : this.endedRecord(h.record, reason, detail);
      // a synced profile is saved after the plane closes: its lock outlives the ended row until then
      const saves = h.profile?.synced === true && this.d.profiles !== undefined && (await this.d.profiles.holdForSave(id).then(() => true, () => false));
      await this.d.store.set(sessionKey(h.record.tenant_id, id), ended).catch((err: Error) => this.d.log.error({ session_id: id, err: err.message }, 'session end could not be written'));
      this.clients.closeAll(id, `session ended: ${ended.end_reason}`);
      // the tenant's slot is free once the row says ended (an acceptance would free it anyway);
      // the profile lock waits for the browser to close, which flushes the profile
      await this.d.limits.releaseRunSlot(h.record.tenant_id, id).catch(() => undefined);
      // the save begins now (renewing its mark while the plane closes) and takes the packed profile once it has
      const saving = saves && h.profile && h.record.profile_id ? this.d.profiles!.save(h.profile, h.record.profile_id) : undefined;
      const rest = this.closeEnded(h, ended, reason, detail, lastLook, saving);
      if (!saving) return rest;
      this.closings.set(id, rest.catch(() => undefined).finally(() => this.closings.delete(id)));
      return ended;
    })();
    return h.ending;
  }

  /** After the ended row: the plane closes, the trace and video are kept, the profile is stored (or its lock freed), the owner lease goes. */
  private async closeEnded(h: Held, ended: SessionRecord, reason: EndReason, detail: string, lastLook: Promise<unknown> | undefined, saving: ReturnType<ProfileSyncs['save']> | undefined): Promise<SessionRecord> {
    const id = h.record.session_id;
    await lastLook;
    try {
      await h.lease.close();
    } catch (err) {
      this.d.log.warn({ session_id: id, err: (err as Error).message }, 'session plane close failed');
    }
    // the trace's bundle is written after the end, off the release's path (its readers wait for it)
    const traced = h.tracing?.then(() => h.trace?.close(ended.end_reason ?? reason, ended.detail ?? detail)).catch(() => undefined);
    if (traced) this.traceWrites.set(id, traced.finally(() => this.traceWrites.delete(id)));
    const video = await stat(this.d.videoFile(h.record.tenant_id, id)).then((st) => st.size > 0, () => false);
    const final = { ...ended, video };
    await this.d.store.set(sessionKey(h.record.tenant_id, id), final).catch(() => undefined);
    clearInterval(h.renew);
    if (saving) {
      const r = await saving;
      this.d.log.info({ session_id: id, tenant_id: h.record.tenant_id, ...describeSave(r) }, 'session profile');
    } else if (h.record.profile_id) await this.d.atomic.deleteIf(`profile:${h.record.profile_id}`, id).catch(() => undefined);
    await this.d.atomic.deleteIf(ownerKey(id), this.d.owner).catch(() => undefined);
    this.held.delete(id);
    this.d.log.info({ session_id: id, tenant_id: h.record.tenant_id, end_reason: final.end_reason }, 'session ended');
    return final;
  }

  /** Resolves once an ended session's plane has closed and its profile is stored (at once when nothing is left to do). */
  closing(id: string): Promise<unknown> {
    return this.closings.get(id) ?? Promise.resolve();
  }

  /** Resolves once this replica has written the ended session's trace (at once when it writes none). */
  traceWritten(id: string): Promise<unknown> {
    // a session saving its profile hands its trace over once its plane has closed
    const closing = this.closings.get(id);
    if (closing) return closing.then(() => this.traceWritten(id));
    return this.traceWrites.get(id) ?? Promise.resolve();
  }

  /** Shutdown: every session this replica owns ends (shutdown). */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.held.keys()].map((id) => this.end(id, 'shutdown', 'the gateway shut down').catch(() => undefined)));
    await Promise.all([...this.closings.values()]);
    await Promise.all([...this.traceWrites.values()]);
  }
}
