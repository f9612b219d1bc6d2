// Profiles that follow the tenant, not the host: the index in the store of record
// (a namespace per tenant, like credentials: version, sizes, sha256, times, last run)
// and each version's archive sealed in the blob store (profile-blobs.ts) with the
// tenant's blob key (sealing.ts). A save writes a new version's blob whole, then
// points the index at it, then drops the old blob: a crash anywhere leaves the
// index on a version whose blob exists.
import { createHash, randomUUID } from 'node:crypto';
import { ServiceError, notFound } from '../errors.ts';
import { unreachableDependency, type KeyedStore, type StateBackend } from '../state/backend.ts';
import { validator } from '../../schemas/index.ts';
import type { Profile, ProxyIdentity as StoredIdentity } from '../../schemas/types.gen.ts';
import type { BlobStore } from './profile-blobs.ts';
import { sealerOnDemand, type Sealer, type VaultKeySource } from './sealing.ts';

export type { Profile };

const validId = validator<string>('profiles.schema.json#/$defs/ProfileId');

/** What a save was given: the agent's archive and what it said of it. */
export interface ProfileArchive {
  archive: Buffer;
  raw_bytes: number;
  files: number;
  sha256: string;
}

export interface ProfileStoreOptions {
  key: VaultKeySource;
  blobs: BlobStore;
  /** SERVICE_MAX_PROFILE_BYTES: the largest compressed archive kept */
  maxBytes: number;
}

/** A save refused or failed: the stored version is unchanged. */
export class ProfileSaveError extends Error {
  constructor(
    readonly errorClass: 'payload_too_large' | 'persist_failed' | 'unavailable',
    message: string,
  ) {
    super(message);
    this.name = 'ProfileSaveError';
  }
}

/**
 * Test-only: RUNPLANE_TEST_PROFILE_SAVE_PAUSE (blob or index) holds each save for
 * RUNPLANE_TEST_PROFILE_SAVE_PAUSE_MS after its new blob is written (blob) or after the
 * index names it (index), so a test can SIGKILL the gateway there
 * (test/runner/profiles-kill.test.ts). Unset in any deployment.
 */
const TEST_PAUSE = { at: process.env.RUNPLANE_TEST_PROFILE_SAVE_PAUSE ?? '', ms: Number(process.env.RUNPLANE_TEST_PROFILE_SAVE_PAUSE_MS ?? 0) || 0 };
const testPause = async (at: 'blob' | 'index'): Promise<void> => {
  if (TEST_PAUSE.ms > 0 && TEST_PAUSE.at === at) await new Promise((r) => setTimeout(r, TEST_PAUSE.ms));
};

const blobKey = (tenantId: string, profileId: string, version: string): string => `${tenantId}/${profileId}/${version}.rps`;
const sealLabel = (profileId: string, version: string): string => `${profileId}/${version}`;

export class ProfileStore {
  private readonly seal: () => Promise<Sealer>;

  constructor(
    private readonly backend: StateBackend,
    private readonly o: ProfileStoreOptions,
  ) {
    this.seal = sealerOnDemand(o.key, (why) => new ServiceError('unavailable', `the profile store has no key: ${why}`));
  }

  get maxBytes(): number {
    return this.o.maxBytes;
  }

  private index(tenantId: string): KeyedStore<Profile> {
    return this.backend.store<Profile>(`profiles:${tenantId}`);
  }

  private lockKey(tenantId: string, profileId: string): string {
    return `profile:${tenantId}/${profileId}`;
  }

  async list(tenantId: string): Promise<Profile[]> {
    const s = this.index(tenantId);
    const all = await Promise.all((await s.keys()).map((k) => s.get(k)));
    return all.filter((p): p is Profile => p !== undefined).sort((a, b) => (a.profile_id < b.profile_id ? -1 : 1));
  }

  /** Another tenant's profile, or an id no profile can have, is 404 like a missing one. */
  async get(tenantId: string, profileId: string): Promise<Profile> {
    const p = validId(profileId) ? await this.index(tenantId).get(profileId) : undefined;
    if (!p) throw notFound('profile not found');
    return p;
  }

  /**
   * Deletes every stored version. The profile's lock is taken for the delete, so a run
   * or session holding the profile makes it 409, and none starts on it meanwhile.
   */
  async delete(tenantId: string, profileId: string): Promise<void> {
    const p = await this.get(tenantId, profileId);
    const key = this.lockKey(tenantId, profileId);
    const me = `delete:${randomUUID()}`;
    const holder = await this.backend.atomic.claim(key, me, 60_000);
    if (holder !== null) throw new ServiceError('conflict', `profile '${profileId}' is in use (${holder.startsWith('delete:') ? 'another delete' : holder} holds it); delete it once that ends`);
    try {
      await this.index(tenantId).delete(profileId);
      await this.o.blobs.remove(blobKey(tenantId, profileId, p.version)).catch(() => undefined);
    } finally {
      await this.backend.atomic.deleteIf(key, me).catch(() => undefined);
    }
  }

  /** The stored version (opened: the gzip archive), or null when the tenant has none of that id. Throws ProfileSaveError-like ServiceErrors when it cannot be read. */
  async load(tenantId: string, profileId: string): Promise<{ version: string; archive: Buffer; row: Profile } | null> {
    const row = await this.index(tenantId).get(profileId);
    if (!row) return null;
    const sealed = await this.o.blobs.get(blobKey(tenantId, profileId, row.version));
    if (!sealed) throw new ServiceError('unavailable', `profile '${profileId}' version ${row.version} has no blob in the store`);
    let archive: Buffer;
    try {
      archive = (await this.seal()).openBytes(tenantId, sealLabel(profileId, row.version), sealed);
    } catch (err) {
      if (err instanceof ServiceError) throw err;
      throw new ServiceError('unavailable', `profile '${profileId}' cannot be opened: ${(err as Error).message}`);
    }
    if (createHash('sha256').update(archive).digest('hex') !== row.sha256) throw new ServiceError('unavailable', `profile '${profileId}' version ${row.version} does not match its sha256`);
    return { version: row.version, archive, row };
  }

  /** Notes that `runId` loaded the profile (best effort: a failure here never stops a run). */
  async touch(tenantId: string, profileId: string, runId: string): Promise<void> {
    const s = this.index(tenantId);
    const row = await s.get(profileId);
    if (row) await s.set(profileId, { ...row, last_used_at: new Date().toISOString(), last_run_id: row.last_run_id ?? runId });
  }

  /**
   * Stores `a` as the profile's new version: refused over the cap, the blob written
   * whole before the index names it, the old version's blob dropped after. `proxy` is
   * the identity the run went out through; a run without a proxy keeps the saved one
   * (a direct visit does not make a site forget the address it knows).
   */
  async save(tenantId: string, profileId: string, a: ProfileArchive, runId: string, proxy?: { provider: string; exit: { country: string; state?: string; city?: string }; session: string } | null): Promise<Profile> {
    if (a.archive.length > this.o.maxBytes) {
      throw new ProfileSaveError('payload_too_large', `profile '${profileId}' is ${a.archive.length} bytes compressed, over SERVICE_MAX_PROFILE_BYTES (${this.o.maxBytes}); the stored version is kept`);
    }
    const sha = createHash('sha256').update(a.archive).digest('hex');
    if (sha !== a.sha256) throw new ProfileSaveError('persist_failed', `profile '${profileId}' arrived damaged (sha256 differs); the stored version is kept`);
    let sealer: Sealer;
    try {
      sealer = await this.seal();
    } catch (err) {
      throw new ProfileSaveError('unavailable', (err as Error).message);
    }
    const version = randomUUID();
    const s = this.index(tenantId);
    try {
      await this.o.blobs.put(blobKey(tenantId, profileId, version), sealer.sealBytes(tenantId, sealLabel(profileId, version), a.archive));
    } catch (err) {
      throw new ProfileSaveError('persist_failed', `profile '${profileId}' could not be written to the ${this.o.blobs.kind} blob store (${(err as Error).message.slice(0, 200)}); the stored version is kept`);
    }
    await testPause('blob');
    const old = await s.get(profileId).catch(() => undefined);
    const now = new Date().toISOString();
    const row: Profile = {
      profile_id: profileId,
      version,
      bytes: a.archive.length,
      raw_bytes: a.raw_bytes,
      files: a.files,
      sha256: sha,
      compression: 'gzip',
      created_at: old?.created_at ?? now,
      updated_at: now,
      last_run_id: runId,
      last_used_at: old?.last_used_at ?? now,
      proxy_identity: proxy ? storedIdentity(proxy) : (old?.proxy_identity ?? null),
    };
    try {
      await s.set(profileId, row);
    } catch (err) {
      await this.o.blobs.remove(blobKey(tenantId, profileId, version)).catch(() => undefined);
      throw new ProfileSaveError(unreachableDependency(err) ? 'unavailable' : 'persist_failed', `profile '${profileId}' could not be indexed; the stored version is kept`);
    }
    await testPause('index');
    if (old && old.version !== version) await this.o.blobs.remove(blobKey(tenantId, profileId, old.version)).catch(() => undefined);
    return row;
  }
}

function storedIdentity(p: { provider: string; exit: { country: string; state?: string; city?: string }; session: string }): StoredIdentity {
  return { provider: p.provider, country: p.exit.country, ...(p.exit.state ? { state: p.exit.state } : {}), ...(p.exit.city ? { city: p.exit.city } : {}), session: p.session };
}
