// The gateway's profile store (gateway/vault/profiles.ts) over the store of record
// and the file blob store: versions, the cap, a save that fails part way leaving the
// stored version as it was, and the sealing (sealBytes/openBytes) that binds a blob
// to its tenant, profile and version.
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openStateBackend, type StateBackend } from '../../gateway/state/backend.ts';
import { FileBlobStore, type BlobStore } from '../../gateway/vault/profile-blobs.ts';
import { ProfileSaveError, ProfileStore } from '../../gateway/vault/profiles.ts';
import { Sealer } from '../../gateway/vault/sealing.ts';
import { ServiceError } from '../../gateway/errors.ts';

const archiveOf = (bytes: Buffer) => ({ archive: bytes, raw_bytes: bytes.length * 3, files: 4, sha256: createHash('sha256').update(bytes).digest('hex') });

/** A blob store whose next put or the index's next set can be made to fail, as a crash part way would. */
class Flaky implements BlobStore {
  readonly kind = 'file' as const;
  failPut = false;
  constructor(readonly inner: BlobStore) {}
  put(key: string, data: Buffer): Promise<void> {
    if (this.failPut) return Promise.reject(new Error('disk full'));
    return this.inner.put(key, data);
  }
  get(key: string): Promise<Buffer | undefined> {
    return this.inner.get(key);
  }
  remove(key: string): Promise<void> {
    return this.inner.remove(key);
  }
}

describe('the profile store (index in the store of record, sealed blobs)', () => {
  let dir: string;
  let state: StateBackend;
  let blobs: Flaky;
  let store: ProfileStore;

  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'runplane-profile-store-'));
    state = await openStateBackend({ kind: 'sqlite', dataDir: dir, maxEventsPerRun: 100 });
    blobs = new Flaky(new FileBlobStore(path.join(dir, 'blobs')));
    store = new ProfileStore(state, { key: { secretsDir: path.join(dir, 'secrets'), shared: false }, blobs, maxBytes: 64 * 1024 });
  });
  afterEach(async () => {
    await state.close();
  });

  const blobFiles = async (): Promise<string[]> => (await readdir(path.join(dir, 'blobs'), { recursive: true, withFileTypes: true }).catch(() => [])).filter((e) => e.isFile()).map((e) => e.name);

  it('saves a new version each time, loads the newest, drops the old blob; the blob holds nothing in the clear', async () => {
    const one = randomBytes(1000);
    const a = await store.save('t1', 'p', archiveOf(one), 'run-1');
    expect(a).to.include({ profile_id: 'p', bytes: 1000, raw_bytes: 3000, files: 4, compression: 'gzip', last_run_id: 'run-1' });
    const two = Buffer.from('a recognisable archive body '.repeat(40));
    const b = await store.save('t1', 'p', archiveOf(two), 'run-2');
    expect(b.version).to.not.equal(a.version);
    expect(b.created_at).to.equal(a.created_at);
    const loaded = await store.load('t1', 'p');
    expect(loaded?.version).to.equal(b.version);
    expect(loaded?.archive.equals(two)).to.equal(true);
    expect(await blobFiles()).to.deep.equal([`${b.version}.rps`]);
    const sealed = await readFile(path.join(dir, 'blobs', 't1', 'p', `${b.version}.rps`));
    expect(sealed.includes(Buffer.from('recognisable'))).to.equal(false);
    expect((await store.list('t1')).map((p) => p.profile_id)).to.deep.equal(['p']);
    // another tenant sees none of it
    expect(await store.load('t2', 'p')).to.equal(null);
    expect(await store.list('t2')).to.deep.equal([]);
    const err = await store.get('t2', 'p').catch((e: unknown) => e);
    expect((err as ServiceError).status).to.equal(404);
  });

  it('refuses an archive over the cap, and one that arrived damaged; the stored version stays', async () => {
    const kept = await store.save('t1', 'p', archiveOf(randomBytes(100)), 'run-1');
    const big = await store.save('t1', 'p', archiveOf(randomBytes(64 * 1024 + 1)), 'run-2').catch((e: unknown) => e);
    expect(big).to.be.instanceOf(ProfileSaveError);
    expect(big).to.include({ errorClass: 'payload_too_large' });
    expect((big as Error).message).to.match(/over SERVICE_MAX_PROFILE_BYTES \(65536\); the stored version is kept/);
    const damaged = await store.save('t1', 'p', { ...archiveOf(randomBytes(100)), sha256: '0'.repeat(64) }, 'run-3').catch((e: unknown) => e);
    expect(damaged).to.include({ errorClass: 'persist_failed' });
    expect((await store.get('t1', 'p')).version).to.equal(kept.version);
    expect(await blobFiles()).to.deep.equal([`${kept.version}.rps`]);
  });

  it('a save whose blob cannot be written leaves the index on the old version, which still loads', async () => {
    const body = randomBytes(500);
    const kept = await store.save('t1', 'p', archiveOf(body), 'run-1');
    blobs.failPut = true;
    const failed = await store.save('t1', 'p', archiveOf(randomBytes(500)), 'run-2').catch((e: unknown) => e);
    expect(failed).to.include({ errorClass: 'persist_failed' });
    expect((failed as Error).message).to.match(/file blob store \(disk full\); the stored version is kept/);
    const loaded = await store.load('t1', 'p');
    expect(loaded?.version).to.equal(kept.version);
    expect(loaded?.archive.equals(body)).to.equal(true);
  });

  it('a blob moved to another tenant, profile or version does not open; a tampered one neither', async () => {
    const sealer = new Sealer(randomBytes(32));
    const plain = randomBytes(300);
    const sealed = sealer.sealBytes('t1', 'p/v1', plain);
    expect(sealer.openBytes('t1', 'p/v1', sealed).equals(plain)).to.equal(true);
    expect(() => sealer.openBytes('t2', 'p/v1', sealed)).to.throw(/does not open/);
    expect(() => sealer.openBytes('t1', 'q/v1', sealed)).to.throw(/does not open/);
    expect(() => sealer.openBytes('t1', 'p/v2', sealed)).to.throw(/does not open/);
    const tampered = Buffer.from(sealed);
    tampered[40] = tampered[40]! ^ 1;
    expect(() => sealer.openBytes('t1', 'p/v1', tampered)).to.throw(/does not open/);
    expect(() => sealer.openBytes('t1', 'p/v1', Buffer.from('RPS1short'))).to.throw(/unknown format/);
    // another operator secret opens nothing
    expect(() => new Sealer(randomBytes(32)).openBytes('t1', 'p/v1', sealed)).to.throw(/does not open/);
  });

  it('DELETE removes every version; 409 while the profile is locked; 404 after', async () => {
    await store.save('t1', 'p', archiveOf(randomBytes(100)), 'run-1');
    await state.atomic.claim('profile:t1/p', 'run-9', 60_000);
    const busy = await store.delete('t1', 'p').catch((e: unknown) => e);
    expect((busy as ServiceError).status).to.equal(409);
    expect((busy as ServiceError).message).to.match(/in use \(run-9 holds it\)/);
    await state.atomic.deleteIf('profile:t1/p', 'run-9');
    await store.delete('t1', 'p');
    expect(await store.load('t1', 'p')).to.equal(null);
    expect(await blobFiles()).to.deep.equal([]);
    expect(((await store.delete('t1', 'p').catch((e: unknown) => e)) as ServiceError).status).to.equal(404);
    // the lock the delete took is gone with it
    expect(await state.atomic.get('profile:t1/p')).to.equal(null);
  });
});
