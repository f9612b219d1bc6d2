// The gateway's half of profiles that follow the tenant, shared by runs and browser
// sessions. A ProfileHandle is made when a run or session with a profile_id starts:
// reading and opening the stored version begins at once, beside the agent's
// placement and warm-up; the lease uploads it (unless the agent's own copy is that
// version) before session/init; the lease's close downloads what the agent packed;
// and `save` stores it after the run's end is recorded, then releases the profile's
// lock, so the next holder starts from the newest version.
import { randomBytes } from 'node:crypto';
import type { Logger } from '../log.ts';
import { PlaneCallError, type PlaneSession } from '../planes/index.ts';
import { profileLockKey, profileSavingKey, type AtomicOps } from '../state/atomic.ts';
import { ProfileSaveError, type Profile, type ProfileArchive, type ProfileStore } from '../vault/profiles.ts';
import type { ProxyIdentity } from './proxies.ts';

/** Raw bytes per upload chunk: over gRPC in the request's blob; over HTTP as base64 under the agents' 1 MB body cap. */
const CHUNK = { grpc: 4 * 1024 * 1024, http: 512 * 1024 };
/** The saving mark's time to live, renewed while a save runs: a crashed saver frees the lock this soon. */
const SAVING_TTL_MS = 60_000;

/** The stored version; `sha256` of its archive is what the agents mark their copies with. */
type Loaded = { version: string; sha256: string; archive: Buffer; proxy: ProxyIdentity | null } | null;

/** What the agent packed at close, or why nothing can be saved. */
type Packed = ProfileArchive | { error: string; errorClass: string };

export interface ProfileTimings {
  /** reading and opening the stored version (beside placement) */
  read_ms?: number;
  /** the agent's copy was the stored version: nothing uploaded */
  reused?: boolean;
  upload_ms?: number;
  upload_bytes?: number;
  download_ms?: number;
}

export class ProfileHandle {
  readonly loading: Promise<Loaded>;
  /** set once the agent was told to sync (init's profile_sync): only then is anything saved */
  synced = false;
  packed: Packed | undefined;
  /** the proxy identity the plane went out through (the last one, after rotations): saved with the profile; null: none */
  proxy: ProxyIdentity | null = null;
  readonly timings: ProfileTimings = {};
  private closedResolve!: () => void;
  /** resolves when the lease's close has taken (or given up on) the packed profile */
  readonly closed = new Promise<void>((r) => (this.closedResolve = r));

  constructor(
    readonly tenantId: string,
    readonly profileId: string,
    readonly holder: string,
    readonly maxBytes: number,
    load: () => Promise<Loaded>,
  ) {
    const t0 = performance.now();
    this.loading = load().then((l) => {
      this.timings.read_ms = Math.round(performance.now() - t0);
      return l;
    });
    // a failure is the lease's to report; this keeps it from being unhandled meanwhile
    this.loading.catch(() => undefined);
  }

  /** The proxy identity the stored version was saved with (null when none, or when it cannot be read). */
  async keptProxy(): Promise<ProxyIdentity | null> {
    return this.loading.then((l) => l?.proxy ?? null, () => null);
  }

  markClosed(): void {
    this.closedResolve();
  }

  /**
   * Before session/init, on the agent the lease got: the profile_sync field of init. The
   * stored version is uploaded unless the agent says its copy is that version already.
   */
  async prepare(session: PlaneSession): Promise<{ upload_id: string | null; version: string | null } | undefined> {
    const loaded = await this.loading;
    let have: unknown;
    try {
      have = (await session.call('profile/have', 'POST', { tenant_id: this.tenantId, profile_id: this.profileId })).body.version;
    } catch (err) {
      // an agent from before profile sync: the profile stays on that host, as it did
      if (err instanceof PlaneCallError && err.kind === 'not_found') return undefined;
      throw err;
    }
    if (!loaded) return { upload_id: null, version: null };
    if (have === loaded.sha256) {
      this.timings.reused = true;
      return { upload_id: null, version: loaded.sha256 };
    }
    const t0 = performance.now();
    const uploadId = randomBytes(18).toString('base64url');
    const t = session.transport;
    const size = CHUNK[t.kind];
    for (let offset = 0; offset < loaded.archive.length || offset === 0; offset += size) {
      const piece = loaded.archive.subarray(offset, offset + size);
      const body = { upload_id: uploadId, offset, ...(t.kind === 'http' ? { data_b64: piece.toString('base64') } : {}) };
      await t.call('profile/put', body, { verb: 'POST', deadlineMs: 30_000, ...(t.kind === 'grpc' ? { blob: piece } : {}) });
      if (piece.length === 0) break;
    }
    this.timings.upload_ms = Math.round(performance.now() - t0);
    this.timings.upload_bytes = loaded.archive.length;
    return { upload_id: uploadId, version: loaded.sha256 };
  }

  /** After session/close: downloads the archive the agent packed (refused unread when over the cap). */
  async take(session: PlaneSession): Promise<void> {
    if (!this.synced) return;
    const t0 = performance.now();
    const token = session.closedToken;
    const get = (body: Record<string, unknown>) => session.transport.call('profile/get', body, { verb: 'POST', sessionToken: token, deadlineMs: 30_000 });
    try {
      const first = await get({ offset: 0 });
      const total = Number(first.body.bytes);
      if (!(total <= this.maxBytes)) {
        this.packed = { errorClass: 'payload_too_large', error: `profile '${this.profileId}' is ${total} bytes compressed, over SERVICE_MAX_PROFILE_BYTES (${this.maxBytes}); the stored version is kept` };
        return;
      }
      const parts: Buffer[] = [first.blob ?? Buffer.alloc(0)];
      let got = parts[0]!.length;
      while (got < total) {
        const r = await get({ offset: got });
        if (!r.blob || r.blob.length === 0) throw new Error('the agent sent an empty chunk');
        parts.push(r.blob);
        got += r.blob.length;
      }
      this.packed = { archive: Buffer.concat(parts, total), raw_bytes: Number(first.body.raw_bytes), files: Number(first.body.files), sha256: String(first.body.sha256) };
      this.timings.download_ms = Math.round(performance.now() - t0);
    } catch (err) {
      this.packed = { errorClass: 'persist_failed', error: `the profile could not be taken from the agent: ${(err as Error).message.slice(0, 200)}` };
    } finally {
      await get({ done: true }).catch(() => undefined);
    }
  }
}

export type SaveResult = { saved: Profile } | { skipped: string } | { failed: string; errorClass: string };

export class ProfileSyncs {
  constructor(
    readonly store: ProfileStore,
    private readonly atomic: AtomicOps,
    private readonly log: Logger,
    /** the saver's process (recovery's owner format), the saving mark's value */
    private readonly owner = '1',
  ) {}

  /** A handle for `holder` (a run or session id) on `tenantProfile` (tenant/profile); reading the stored version starts now. */
  begin(tenantId: string, tenantProfile: string, holder: string): ProfileHandle {
    const profileId = tenantProfile.slice(tenantId.length + 1);
    return new ProfileHandle(tenantId, profileId, holder, this.store.maxBytes, async () => {
      const l = await this.store.load(tenantId, profileId);
      if (l) void this.store.touch(tenantId, profileId, holder).catch(() => undefined);
      return l && { version: l.version, sha256: l.row.sha256, archive: l.archive, proxy: identityFromRow(l.row) };
    });
  }

  /** Before the end is written: the lock outlives the end until `save` releases it. */
  async holdForSave(holder: string): Promise<void> {
    await this.atomic.put(profileSavingKey(holder), this.owner, SAVING_TTL_MS);
  }

  /**
   * After the end is recorded: waits for the plane's close to hand over the packed profile,
   * stores it, then releases the profile's lock and the saving mark. Never throws.
   */
  async save(h: ProfileHandle, tenantProfile: string): Promise<SaveResult> {
    const renew = setInterval(() => void this.atomic.put(profileSavingKey(h.holder), this.owner, SAVING_TTL_MS).catch(() => undefined), SAVING_TTL_MS / 3);
    renew.unref();
    try {
      // a plane that never opened, or an agent without profile sync: nothing to take back
      if (!h.synced) return { skipped: 'the plane did not sync the profile' };
      await h.closed;
      const p = h.packed;
      if (!p) return { skipped: 'the plane closed without a packed profile (lost?)' };
      if ('error' in p) return this.failed(h, p.errorClass, p.error);
      const t0 = performance.now();
      try {
        const saved = await this.store.save(h.tenantId, h.profileId, p, h.holder, h.proxy);
        this.log.info({ run_id: h.holder, tenant_id: h.tenantId, profile_id: h.profileId, version: saved.version, bytes: saved.bytes, raw_bytes: saved.raw_bytes, save_ms: Math.round(performance.now() - t0), ...h.timings }, 'profile saved');
        return { saved };
      } catch (err) {
        if (err instanceof ProfileSaveError) return this.failed(h, err.errorClass, err.message);
        return this.failed(h, 'persist_failed', `the profile could not be saved: ${(err as Error).message.slice(0, 200)}`);
      }
    } finally {
      clearInterval(renew);
      await this.atomic.deleteIf(profileLockKey(tenantProfile), h.holder).catch(() => undefined);
      await this.atomic.deleteIf(profileSavingKey(h.holder), this.owner).catch(() => undefined);
    }
  }

  private failed(h: ProfileHandle, errorClass: string, message: string): SaveResult {
    this.log.warn({ run_id: h.holder, tenant_id: h.tenantId, profile_id: h.profileId, error_class: errorClass, err: message }, 'profile not saved; the stored version is kept');
    return { failed: message, errorClass };
  }
}

/** The identity a profile row keeps, in the shape the proxy layer chooses with. */
function identityFromRow(row: Profile): ProxyIdentity | null {
  const p = row.proxy_identity;
  if (!p) return null;
  return { provider: p.provider, session: p.session, exit: { country: p.country, ...(p.state ? { state: p.state } : {}), ...(p.city ? { city: p.city } : {}) } };
}

/** A save's outcome as the run's `run.profile` event tells it (never the contents). */
export function describeSave(r: SaveResult): Record<string, unknown> {
  if ('saved' in r) return { saved: true, profile_id: r.saved.profile_id, version: r.saved.version, bytes: r.saved.bytes };
  if ('failed' in r) return { saved: false, error_class: r.errorClass, error: r.failed };
  return { saved: false, skipped: r.skipped };
}
