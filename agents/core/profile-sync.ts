// The agent's half of profiles that follow the tenant: the gateway uploads the stored
// archive in chunks before session/init (`profile/put`, staged by an upload id), init
// unpacks it into the profile dir before the browser launches, close packs the dir
// once the browser has let go of it, and the gateway downloads that archive in chunks
// with the closed session's token (`profile/get`). Chunks stay under the 1 MB body
// cap of both transports, so no message limit is ever near.
import { randomBytes } from 'node:crypto';
import { open, readFile, rm, stat, writeFile, mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { browserUser } from './browser-user.ts';
import { badRequest, conflict, notFound, tooLarge, unauthorized } from './errors.ts';
import { packProfile, resetProfile, unpackProfile, VERSION_MARK, type PackResult } from './profile-archive.ts';
import { profileDir, type Body } from './validate.ts';
import type { SessionInitRequest } from './types.ts';

/** Raw bytes of one chunk over HTTP: base64 of it stays under the 1 MB JSON body cap. */
export const PROFILE_CHUNK_BYTES = 512 * 1024;
/** Raw bytes of one chunk over gRPC, in the message's blob: far under both ends' message limits (16 and 64 MB). */
export const PROFILE_GRPC_CHUNK_BYTES = 4 * 1024 * 1024;
const UPLOAD_ID = /^[A-Za-z0-9_-]{16,64}$/;
/** A staged upload nobody initialised a session with is swept after this long. */
const STALE_MS = 15 * 60_000;
/** Packed archives of closed sessions kept for download (newest kept). */
const KEEP_PACKED = 8;

export interface ProfileSyncOptions {
  /** PLANE_MAX_PROFILE_BYTES: the largest archive the agent takes or hands out (default 300 MB) */
  maxBytes: number;
}

type Packed = { file: string; result: PackResult } | { error: string };

export function maxProfileBytes(env: NodeJS.ProcessEnv = process.env): number {
  const v = Number(env.PLANE_MAX_PROFILE_BYTES ?? '');
  return Number.isSafeInteger(v) && v > 0 ? v : 300 * 1024 * 1024;
}

export class ProfileSync {
  private readonly packed = new Map<string, Packed>();
  private readonly dir: string;

  constructor(
    dataDir: string,
    private readonly o: ProfileSyncOptions = { maxBytes: maxProfileBytes() },
  ) {
    this.dir = join(dataDir, 'profile-staging');
  }

  private staged(uploadId: unknown): string {
    if (typeof uploadId !== 'string' || !UPLOAD_ID.test(uploadId)) throw badRequest('upload_id must be 16-64 of letters, digits, _ and -');
    return join(this.dir, `in-${uploadId}.rpf`);
  }

  /** POST /profile/put {upload_id, offset, data_b64} (or the bytes in the gRPC blob): appends a chunk; a chunk sent again (a retry) is taken once. */
  async put(b: Body, blob?: Buffer): Promise<Record<string, unknown>> {
    const file = this.staged(b.upload_id);
    const offset = b.offset;
    if (typeof offset !== 'number' || !Number.isSafeInteger(offset) || offset < 0) throw badRequest('offset must be a non-negative integer');
    if (!blob && typeof b.data_b64 !== 'string') throw badRequest('data_b64 must be a base64 string');
    const data = blob ?? Buffer.from(b.data_b64 as string, 'base64');
    if (data.length > PROFILE_GRPC_CHUNK_BYTES) throw tooLarge(`a chunk is at most ${PROFILE_GRPC_CHUNK_BYTES} bytes`);
    if (offset + data.length > this.o.maxBytes) throw tooLarge(`a profile archive is at most ${this.o.maxBytes} bytes (PLANE_MAX_PROFILE_BYTES)`);
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    if (offset === 0) await this.sweep();
    const have = await stat(file).then((s) => s.size, () => 0);
    if (offset + data.length <= have) return { upload_id: b.upload_id, bytes: have };
    if (offset !== have) throw conflict(`upload has ${have} bytes; the next chunk starts there`);
    const fh = await open(file, 'a', 0o600);
    try {
      await fh.write(data);
    } finally {
      await fh.close();
    }
    return { upload_id: b.upload_id, bytes: have + data.length };
  }

  /** Removes staged uploads and packed archives older than STALE_MS (an init that never came, an agent restarted). */
  private async sweep(): Promise<void> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    const now = Date.now();
    for (const n of names) {
      const f = join(this.dir, n);
      const st = await stat(f).catch(() => undefined);
      if (st && now - st.mtimeMs > STALE_MS) await rm(f, { force: true });
    }
  }

  /**
   * At init, before the browser launches: the staged upload replaces the profile dir
   * (version marked), or, for a profile the store does not hold, the dir is emptied so
   * the browser starts fresh, not on what an earlier session left on this host.
   */
  async prepare(init: SessionInitRequest, dataDir: string): Promise<void> {
    const sync = init.profile_sync;
    if (!init.persist_profile) return;
    const dir = profileDir(dataDir, init.tenant_id, init.profile_id);
    // a session that does not sync changes the dir unpacked: its mark would lie
    if (!sync) return void (await rm(join(dir, VERSION_MARK), { force: true }));
    if (sync.upload_id === null) {
      // the agent's own copy is the stored version already: nothing moves
      if (!(sync.version !== null && (await readFile(join(dir, VERSION_MARK), 'utf8').catch(() => '')) === sync.version)) await resetProfile(dir);
    } else {
      const file = this.staged(sync.upload_id);
      if (!(await stat(file).then(() => true, () => false))) throw badRequest('profile_sync.upload_id names no upload on this agent (upload it with /profile/put first)');
      try {
        await unpackProfile(file, dir, browserUser(), this.o.maxBytes * 8);
      } finally {
        await rm(file, { force: true });
      }
    }
    // the browser changes the dir from now on: a mark kept would name a version the dir no longer is
    // if this session never packs (the agent or its gateway killed); pack marks what it packed
    await rm(join(dir, VERSION_MARK), { force: true });
  }

  /** /profile/have {tenant_id, profile_id}: the sha256 of the archive the agent's copy is (packed or unpacked last), so the gateway can skip the upload. */
  async have(init: Pick<SessionInitRequest, 'tenant_id' | 'profile_id'>, dataDir: string): Promise<Record<string, unknown>> {
    const dir = profileDir(dataDir, init.tenant_id, init.profile_id);
    const version = await readFile(join(dir, VERSION_MARK), 'utf8').catch(() => null);
    return { version };
  }

  /** At close, the browser gone: packs the dir for the gateway to take (kept by the session's token). */
  async pack(token: string, init: SessionInitRequest, dataDir: string): Promise<void> {
    if (!init.profile_sync || !init.persist_profile) return;
    const dir = profileDir(dataDir, init.tenant_id, init.profile_id);
    const out = join(this.dir, `out-${randomBytes(12).toString('hex')}.rpf`);
    let entry: Packed;
    try {
      await rm(join(dir, VERSION_MARK), { force: true });
      const result = await packProfile(dir, out);
      // the dir is this archive now: a next session given the same one keeps the dir instead of unpacking it
      await writeFile(join(dir, VERSION_MARK), result.sha256, { mode: 0o600 });
      entry = { file: out, result };
    } catch (err) {
      await rm(out, { force: true });
      entry = { error: `packing the profile failed: ${(err as Error).message.split('\n')[0]?.slice(0, 200)}` };
    }
    this.packed.set(token, entry);
    for (const [k, v] of this.packed) {
      if (this.packed.size <= KEEP_PACKED) break;
      this.packed.delete(k);
      if ('file' in v) await rm(v.file, { force: true });
    }
  }

  /** POST /profile/get {offset, done?}: a chunk of the closed session's archive, with its size and sha256; done: true removes it. */
  async get(token: string | undefined, b: Body, grpc: boolean, find: (token: string) => string | undefined): Promise<{ body: Record<string, unknown>; blob?: Buffer }> {
    if (!token) throw unauthorized('missing X-Service-Session');
    const key = find(token);
    const p = key === undefined ? undefined : this.packed.get(key);
    if (!p || key === undefined) throw notFound('no packed profile for this session token (unknown token, no profile_sync, or evicted)');
    if ('error' in p) throw conflict(p.error);
    if (b.done === true) {
      this.packed.delete(key);
      await rm(p.file, { force: true });
      return { body: { done: true } };
    }
    const offset = b.offset;
    if (typeof offset !== 'number' || !Number.isSafeInteger(offset) || offset < 0 || offset > p.result.bytes) throw badRequest('offset must be an integer within the archive');
    const fh = await open(p.file, 'r');
    try {
      const n = Math.min(grpc ? PROFILE_GRPC_CHUNK_BYTES : PROFILE_CHUNK_BYTES, p.result.bytes - offset);
      const blob = Buffer.alloc(n);
      await fh.read(blob, 0, n, offset);
      return { body: { ...p.result, offset }, blob };
    } finally {
      await fh.close();
    }
  }

  /** Tokens of packed archives, to match a caller's token in constant time. */
  tokens(): IterableIterator<string> {
    return this.packed.keys();
  }
}
