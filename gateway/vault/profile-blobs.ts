// Where a profile's sealed archive lives: a file under the data directory (the
// embedded default) or an object in an S3-compatible bucket, through the trace
// side's client (sdk/store.ts's ObjectStore over aws4fetch). Keys are
// <tenant>/<profile>/<version>.rps, each part a checked id, so a key never
// leaves its root or prefix. A blob is written whole before the index names it.
import { readFile, rm, rmdir } from 'node:fs/promises';
import path from 'node:path';
import { atomicWriteFile, ObjectStore, type ObjectStoreOptions } from '../../sdk/store.ts';
import { resolveInside } from '../../shared/ids.ts';

export interface BlobStore {
  /** for logs and GET /v1/profiles: file or s3 */
  readonly kind: 'file' | 's3';
  put(key: string, data: Buffer): Promise<void>;
  /** undefined when there is no such blob */
  get(key: string): Promise<Buffer | undefined>;
  remove(key: string): Promise<void>;
}

const KEY = /^[A-Za-z0-9][A-Za-z0-9._~-]{0,63}\/[A-Za-z0-9_][A-Za-z0-9._-]{0,127}\/[A-Za-z0-9-]{1,64}\.rps$/;

function checked(key: string): string {
  if (!KEY.test(key)) throw new Error('a profile blob key of an unsafe shape');
  return key;
}

export class FileBlobStore implements BlobStore {
  readonly kind = 'file' as const;
  constructor(private readonly root: string) {}

  private file(key: string): string {
    return resolveInside(this.root, ...checked(key).split('/'));
  }

  async put(key: string, data: Buffer): Promise<void> {
    // temp file, fsync, rename: a crash leaves the whole blob or none
    await atomicWriteFile(this.file(key), data);
  }

  async get(key: string): Promise<Buffer | undefined> {
    return readFile(this.file(key)).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return undefined;
      throw e;
    });
  }

  async remove(key: string): Promise<void> {
    const file = this.file(key);
    await rm(file, { force: true });
    // the profile's folder goes with its last version (a DELETE); one still holding a version stays
    await rmdir(path.dirname(file)).catch(() => undefined);
  }
}

export class S3BlobStore implements BlobStore {
  readonly kind = 's3' as const;
  private readonly store: ObjectStore;
  constructor(o: ObjectStoreOptions) {
    this.store = new ObjectStore(o);
  }

  async put(key: string, data: Buffer): Promise<void> {
    const w = await this.store.openWriteBinary(checked(key));
    w.write(data);
    await w.close();
  }

  async get(key: string): Promise<Buffer | undefined> {
    return this.store.readBytes(checked(key)).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return undefined;
      throw e;
    });
  }

  remove(key: string): Promise<void> {
    return this.store.remove(checked(key));
  }
}

/** A bucket when SERVICE_PROFILE_S3_* names one (config.profileS3); else files under <dataDir>/profiles-store. */
export function profileBlobStore(dataDir: string, s3: ObjectStoreOptions | undefined): BlobStore {
  return s3 ? new S3BlobStore(s3) : new FileBlobStore(path.join(dataDir, 'profiles-store'));
}
