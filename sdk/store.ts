// The Store protocol: where a bundle's files go. FileStore (default) writes
// under a directory; ObjectStore writes to an S3-compatible bucket over HTTP
// (path-style, AWS Signature V4). Both take bundle-relative paths, checked by
// shared/ids.ts: a resolved file stays inside the store's root, a key under its prefix.
import { randomBytes } from 'node:crypto';
import { AwsClient } from 'aws4fetch';
import fs from 'node:fs';
import { mkdir, readFile, readdir, rename, rm, stat, open } from 'node:fs/promises';
import { promisify } from 'node:util';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { checkBundlePath, checkKeyPrefix, keyInside, resolveInside } from '../shared/ids.ts';
import { sha256Hex } from './util.ts';

// The callback forms, not fs/promises': a FileHandle per write costs about 60% more
// CPU and twice the event-loop time (6,000 6 KB files, 8 in flight: 37-56 against
// 62-92 us of CPU a file; bench/trace's ingest writes about six files a step)
const writeFileCb = promisify(fs.writeFile);
const appendFileCb = promisify(fs.appendFile);

// Files up to this size are written in place synchronously: a write to the page cache
// costs 5-23 us of CPU that way against 40-55 us through the threadpool (open, write and
// close are three hops, each a wake of a worker and of the loop), and it is over before
// a hop would have been (6,000 files of 6 KB, appends of 300 B; docs/decisions.md)
const SYNC_WRITE_MAX = 256 * 1024;

export interface StoreWriter {
  write(chunk: string | Uint8Array): void;
  /** commits the file (atomically on the file store) */
  close(): Promise<void>;
}

export interface Store {
  readonly rootUri: string;
  /** a URL a reader can fetch the file from for ttlSeconds (file:// on the file store) */
  signedUrl(relpath: string, ttlSeconds?: number): Promise<string>;
  openWriteBinary(relpath: string): Promise<StoreWriter>;
  openWriteText(relpath: string): Promise<StoreWriter>;
  exists(relpath: string): Promise<boolean>;
  readText(relpath: string): Promise<string>;
  readBytes(relpath: string): Promise<Buffer>;
  /** bundle-relative paths of every file under prefix (our addition: validate_bundle and replay need it) */
  list(prefix?: string): Promise<string[]>;
  /**
   * Optional: a staging store whose files appear at this store's root all at
   * once on commit (the file store: a temporary directory, then rename). A
   * store without it receives the files directly, manifest.json last.
   */
  stage?(): Promise<StagedStore>;
}

export interface StagedStore {
  store: Store;
  commit(): Promise<void>;
  discard(): Promise<void>;
}

/**
 * A bundle-relative path: `/`-separated segments, none empty, `.` or `..`; no
 * leading `/`, backslash, percent sign or control character; at most 1024
 * characters (shared/ids.ts). Throws "invalid bundle path: ..." otherwise.
 */
export function checkRelpath(relpath: string): string {
  return checkBundlePath(relpath);
}

export async function writeBytes(store: Store, relpath: string, data: string | Uint8Array): Promise<void> {
  const w = typeof data === 'string' ? await store.openWriteText(relpath) : await store.openWriteBinary(relpath);
  w.write(data);
  await w.close();
}

function bufferingWriter(commit: (data: Buffer) => Promise<void>): StoreWriter {
  const chunks: Buffer[] = [];
  let closed = false;
  return {
    write(chunk) {
      if (closed) throw new Error('writer is closed');
      chunks.push(typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk));
    },
    async close() {
      if (closed) return;
      closed = true;
      await commit(Buffer.concat(chunks));
    },
  };
}

/** Writes a file by temp file + fsync + rename, so a reader never sees half of it. */
export async function atomicWriteFile(file: string, data: string | Uint8Array): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.tmp-${randomBytes(6).toString('hex')}`;
  const fh = await open(tmp, 'w');
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, file);
}

/** Writes files in place for a FileStore (the ingest's: a worker thread); without one, the store writes them itself. */
export interface FileWriter {
  write(file: string, data: Uint8Array): Promise<void>;
  /** appends unless the file would pass `limit` bytes (false then, nothing written) */
  append(file: string, data: Uint8Array, limit?: number): Promise<boolean>;
}

export class FileStore implements Store {
  readonly root: string;
  /** each file written by temp file + fsync + rename (off inside a staging directory) */
  private readonly durable: boolean;
  /** fsync a staged bundle's files before the rename (power-loss durability; a killed process never leaves half a bundle either way) */
  private readonly fsync: boolean;
  /** directories this store made: a bundle has hundreds of files in a handful of folders, and each mkdir is a syscall on the close path */
  private readonly made = new Set<string>();
  private readonly writer: FileWriter | undefined;

  constructor(root: string, opts: { durable?: boolean; fsync?: boolean; writer?: FileWriter } = {}) {
    this.root = path.resolve(root);
    this.durable = opts.durable ?? true;
    this.fsync = opts.fsync ?? process.env.TRACE_FSYNC === '1';
    this.writer = opts.writer;
  }

  private async madeDir(file: string): Promise<void> {
    const dir = path.dirname(file);
    if (!this.made.has(dir)) {
      await mkdir(dir, { recursive: true });
      this.made.add(dir);
    }
  }

  get rootUri(): string {
    return pathToFileURL(this.root).href;
  }

  /** the absolute file of relpath, refused unless it lies inside the root */
  file(relpath: string): string {
    return resolveInside(this.root, checkRelpath(relpath));
  }

  async signedUrl(relpath: string): Promise<string> {
    return pathToFileURL(this.file(relpath)).href;
  }

  private async put(relpath: string, data: Buffer): Promise<void> {
    const file = this.file(relpath);
    if (this.durable) return atomicWriteFile(file, data);
    await this.madeDir(file);
    if (this.writer) await this.writer.write(file, data);
    else if (data.length <= SYNC_WRITE_MAX) fs.writeFileSync(file, data);
    else await writeFileCb(file, data);
  }

  /**
   * Appends to a file (made when missing) unless it would pass `limit` bytes
   * (false then, nothing written): a growing .jsonl or .log costs its new
   * bytes, not a rewrite of all of it. Not atomic, as a non-durable put is not.
   */
  async append(relpath: string, data: Uint8Array, limit = Infinity): Promise<boolean> {
    const file = this.file(relpath);
    await this.madeDir(file);
    if (this.writer) return this.writer.append(file, data, limit);
    const small = data.length <= SYNC_WRITE_MAX;
    if (Number.isFinite(limit)) {
      const size = small ? (fs.statSync(file, { throwIfNoEntry: false })?.size ?? 0) : await stat(file).then((st) => st.size, () => 0);
      if (size + data.length > limit) return false;
    }
    if (small) fs.appendFileSync(file, data);
    else await appendFileCb(file, data);
    return true;
  }

  async openWriteBinary(relpath: string): Promise<StoreWriter> {
    this.file(relpath);
    return bufferingWriter((d) => this.put(relpath, d));
  }

  openWriteText(relpath: string): Promise<StoreWriter> {
    return this.openWriteBinary(relpath);
  }

  async exists(relpath: string): Promise<boolean> {
    return stat(this.file(relpath)).then(
      (s) => s.isFile(),
      () => false,
    );
  }

  readText(relpath: string): Promise<string> {
    return readFile(this.file(relpath), 'utf8');
  }

  readBytes(relpath: string): Promise<Buffer> {
    return readFile(this.file(relpath));
  }

  async list(prefix = ''): Promise<string[]> {
    const base = prefix ? this.file(prefix.replace(/\/$/, '')) : this.root;
    const out: string[] = [];
    const walk = async (dir: string): Promise<void> => {
      const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
      for (const e of entries) {
        const full = path.join(dir, e.name);
        if (e.isDirectory()) await walk(full);
        else if (e.isFile() && !/\.tmp-[0-9a-f]{12}$/.test(e.name)) out.push(path.relative(this.root, full).split(path.sep).join('/'));
      }
    };
    await walk(base);
    return out.sort();
  }

  /** Staging: a hidden sibling directory renamed onto the root on commit. */
  async stage(): Promise<StagedStore> {
    const dir = path.join(path.dirname(this.root), `.${path.basename(this.root)}.partial-${randomBytes(6).toString('hex')}`);
    await mkdir(dir, { recursive: true });
    const staged = new FileStore(dir, { durable: false });
    const root = this.root;
    const fsync = this.fsync;
    return {
      store: staged,
      commit: () => commitStagedDir(dir, root, { fsync }),
      async discard() {
        await rm(dir, { recursive: true, force: true });
      },
    };
  }
}

/** The name FileStore.stage() gives the staging directory of the bundle at root: `.<name>.partial-<12 hex>`, beside it. */
export const STAGING_DIR_RE = /^\.(.+)\.partial-[0-9a-f]{12}$/;

/**
 * Renames a staging directory onto root (a previous bundle there is replaced
 * whole: moved aside first, removed after); what FileStore's commit does, and
 * what recoverStagedBundle does with a staging directory a killed process left.
 */
export async function commitStagedDir(dir: string, root: string, opts: { fsync?: boolean } = {}): Promise<void> {
  if (opts.fsync) await syncTree(dir);
  const old = `${root}.old-${randomBytes(6).toString('hex')}`;
  const hadOld = await rename(root, old).then(
    () => true,
    () => false,
  );
  await rename(dir, root);
  await syncDir(path.dirname(root));
  if (hadOld) await rm(old, { recursive: true, force: true });
}

async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** fsync every file and directory below dir. */
async function syncTree(dir: string): Promise<void> {
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) await syncTree(full);
    else await syncDir(full);
  }
  await syncDir(dir);
}

// ---------------------------------------------------------------- object store

export interface ObjectStoreOptions {
  /** e.g. http://127.0.0.1:9000 (path-style addressing) */
  endpoint: string;
  bucket: string;
  /** key prefix of this bundle, e.g. bundles/<run_id> */
  prefix?: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** temporary credentials (STS): sent as X-Amz-Security-Token */
  sessionToken?: string;
  region?: string;
  /** retries of a request answered 5xx or 429, with jittered exponential backoff from 50 ms (default 4) */
  retries?: number;
}

const encodeKey = (key: string): string => key.split('/').map((s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)).join('/');

/**
 * An S3-compatible bucket (PUT/GET/HEAD object, ListObjectsV2, presigned GETs). Requests
 * are signed (AWS Signature V4, session tokens included) and retried by aws4fetch, a
 * maintained client; this class only maps the store's paths to keys under its prefix.
 */
export class ObjectStore implements Store {
  private readonly o: ObjectStoreOptions & { prefix: string; region: string };
  private readonly client: AwsClient;

  constructor(opts: ObjectStoreOptions) {
    this.o = { ...opts, prefix: checkKeyPrefix((opts.prefix ?? '').replace(/^\/|\/$/g, '')), region: opts.region ?? 'us-east-1', endpoint: opts.endpoint.replace(/\/$/, '') };
    this.client = new AwsClient({ accessKeyId: opts.accessKeyId, secretAccessKey: opts.secretAccessKey, sessionToken: opts.sessionToken, service: 's3', region: this.o.region, retries: opts.retries ?? 4 });
  }

  get rootUri(): string {
    return `s3://${this.o.bucket}/${this.o.prefix}`;
  }

  /** a store for a sub-prefix (one bundle) of the same bucket; a prefix with an empty, . or .. segment is refused */
  child(prefix: string): ObjectStore {
    checkKeyPrefix(prefix);
    return new ObjectStore({ ...this.o, prefix: [this.o.prefix, prefix].filter(Boolean).join('/') });
  }

  /** the object key of relpath, refused unless it stays under the prefix */
  private key(relpath: string): string {
    return keyInside(this.o.prefix, relpath);
  }

  private url(key: string, query: Record<string, string> = {}): string {
    const qs = new URLSearchParams(query).toString();
    return `${this.o.endpoint}/${this.o.bucket}/${encodeKey(key)}${qs ? `?${qs}` : ''}`;
  }

  private request(method: string, key: string, query: Record<string, string>, body?: Buffer): Promise<Response> {
    // the payload's hash is signed (S3 checks the body against it), not UNSIGNED-PAYLOAD
    return this.client.fetch(this.url(key, query), { method, body, headers: { 'x-amz-content-sha256': sha256Hex(body ?? '') } });
  }

  async signedUrl(relpath: string, ttlSeconds = 3600): Promise<string> {
    const expires = String(Math.max(1, Math.min(604800, Math.floor(ttlSeconds))));
    const signed = await this.client.sign(this.url(this.key(relpath), { 'X-Amz-Expires': expires }), { method: 'GET', aws: { signQuery: true } });
    return signed.url;
  }

  async openWriteBinary(relpath: string): Promise<StoreWriter> {
    const key = this.key(relpath);
    return bufferingWriter(async (data) => {
      const res = await this.request('PUT', key, {}, data);
      await res.arrayBuffer();
      if (!res.ok) throw new Error(`object store PUT ${key}: HTTP ${res.status}`);
    });
  }

  openWriteText(relpath: string): Promise<StoreWriter> {
    return this.openWriteBinary(relpath);
  }

  async exists(relpath: string): Promise<boolean> {
    const res = await this.request('HEAD', this.key(relpath), {});
    await res.arrayBuffer();
    return res.ok;
  }

  async readBytes(relpath: string): Promise<Buffer> {
    const key = this.key(relpath);
    const res = await this.request('GET', key, {});
    const body = Buffer.from(await res.arrayBuffer());
    if (res.status === 404) throw Object.assign(new Error(`no such object ${key}`), { code: 'ENOENT' });
    if (!res.ok) throw new Error(`object store GET ${key}: HTTP ${res.status}`);
    return body;
  }

  async readText(relpath: string): Promise<string> {
    return (await this.readBytes(relpath)).toString('utf8');
  }

  /** Deletes an object (the gateway's profile store drops replaced versions); a missing one is no error, as S3 answers. */
  async remove(relpath: string): Promise<void> {
    const key = this.key(relpath);
    const res = await this.request('DELETE', key, {});
    await res.arrayBuffer();
    if (!res.ok && res.status !== 404) throw new Error(`object store DELETE ${key}: HTTP ${res.status}`);
  }

  async list(prefix = ''): Promise<string[]> {
    checkKeyPrefix(prefix.replace(/\/$/, ''));
    const base = this.o.prefix ? `${this.o.prefix}/` : '';
    const out: string[] = [];
    let token: string | undefined;
    do {
      const query: Record<string, string> = { 'list-type': '2', prefix: base + prefix };
      if (token) query['continuation-token'] = token;
      const res = await this.request('GET', '', query);
      const xml = await res.text();
      if (!res.ok) throw new Error(`object store list: HTTP ${res.status}`);
      for (const m of xml.matchAll(/<Key>([^<]*)<\/Key>/g)) out.push(unxml(m[1]!).slice(base.length));
      token = /<IsTruncated>true<\/IsTruncated>/.test(xml) ? unxml(/<NextContinuationToken>([^<]*)</.exec(xml)?.[1] ?? '') : undefined;
    } while (token);
    return out.sort();
  }
}

const unxml = (s: string): string => s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&amp;/g, '&');
