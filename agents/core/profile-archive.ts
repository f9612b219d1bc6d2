// A browser profile as one gzip stream, to move it between agents through the
// gateway's profile store. The format is ours ("RPF1"), not tar: it can express
// only directories and regular files under relative paths, so an archive cannot
// carry a symlink, a device, an owner or an absolute path, and the reader still
// refuses every path that would leave the profile dir (a hostile gateway or store).
// Only what keeps a login is packed: caches and lock files are left behind.
import { createHash } from 'node:crypto';
import { constants, createReadStream, createWriteStream } from 'node:fs';
import { lstat, mkdir, open, readdir, rename, rm } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip, constants as zc } from 'node:zlib';
import { giveToBrowser, type BrowserUser } from './browser-user.ts';
import { badRequest } from './errors.ts';

const MAGIC = Buffer.from('RPF1\n');
/** Longest path in an archive, in bytes of its JSON header. */
const MAX_HEADER = 4096;
/** The agent's mark of the stored version a profile dir holds (not packed). */
export const VERSION_MARK = '.runplane-profile-version';

// Directories and files that hold nothing of a login: caches the browser rebuilds,
// crash dumps, and the locks and sockets of a running browser.
const SKIP_DIRS = new Set([
  'Cache',
  'Code Cache',
  'GPUCache',
  'ShaderCache',
  'GrShaderCache',
  'GraphiteDawnCache',
  'DawnCache',
  'DawnGraphiteCache',
  'DawnWebGPUCache',
  'Crashpad',
  'Crash Reports',
  'component_crx_cache',
  'extensions_crx_cache',
  'Safe Browsing',
  'optimization_guide_model_store',
  'OptimizationHints',
  'hyphen-data',
  'WidevineCdm',
  'BrowserMetrics',
  'blob_storage',
]);
const SKIP_FILE = /^(Singleton.*|lockfile|LOCK|DevToolsActivePort|BrowserMetrics.*\.pma|.*\.tmp)$/;

export interface PackResult {
  /** bytes of the gzip archive */
  bytes: number;
  /** bytes of the files packed, before compression */
  raw_bytes: number;
  files: number;
  sha256: string;
}

function header(h: { p: string; t: 'd' | 'f'; s: number }): Buffer {
  const json = Buffer.from(JSON.stringify(h));
  const len = Buffer.alloc(4);
  len.writeUInt32BE(json.length);
  return Buffer.concat([len, json]);
}

/** The archive's records: directories before what they hold; symlinks and special files are never followed nor packed. */
async function* records(root: string, count: { raw: number; files: number }): AsyncGenerator<Buffer> {
  yield MAGIC;
  const walk = async function* (rel: string): AsyncGenerator<Buffer> {
    const entries = await readdir(join(root, rel), { withFileTypes: true }).catch(() => []);
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const p = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        if (SKIP_DIRS.has(e.name)) continue;
        yield header({ p, t: 'd', s: 0 });
        yield* walk(p);
      } else if (e.isFile()) {
        if (SKIP_FILE.test(e.name) || (rel === '' && e.name === VERSION_MARK)) continue;
        // a file the browser removed meanwhile is skipped; its size is what we read, not what stat said
        const fh = await open(join(root, p), constants.O_RDONLY | constants.O_NOFOLLOW).catch(() => undefined);
        if (!fh) continue;
        try {
          const data = await fh.readFile();
          count.raw += data.length;
          count.files += 1;
          yield header({ p, t: 'f', s: data.length });
          if (data.length > 0) yield data;
        } finally {
          await fh.close();
        }
      }
    }
  };
  yield* walk('');
  const end = Buffer.alloc(4);
  yield end;
}

/**
 * Packs the profile dir `dir` (its browser closed) into `out`. gzip level 1: on a
 * signed-in profile (940 KB of files -> 51.5 KB) level 6 saved 10% more for 2.6
 * times the CPU, level 9 11% for 8 times (docs/decisions.md).
 */
export async function packProfile(dir: string, out: string): Promise<PackResult> {
  const count = { raw: 0, files: 0 };
  const hash = createHash('sha256');
  let bytes = 0;
  await mkdir(dirname(out), { recursive: true, mode: 0o700 });
  const file = createWriteStream(out, { mode: 0o600 });
  const tap = new Writable({
    write(chunk: Buffer, _enc, cb) {
      hash.update(chunk);
      bytes += chunk.length;
      if (file.write(chunk)) cb();
      else file.once('drain', () => cb());
    },
    final(cb) {
      file.end(() => cb());
    },
  });
  await pipeline(Readable.from(records(dir, count)), createGzip({ level: zc.Z_BEST_SPEED }), tap);
  return { bytes, raw_bytes: count.raw, files: count.files, sha256: hash.digest('hex') };
}

// eslint-disable-next-line no-control-regex -- matching control characters is the point
const BAD_CHARS = /[\u0000-\u001f\u007f\\]/;

/** `rel` resolved under `root`, or a refusal: absolute, empty, . or .. segments, backslashes, control characters. */
export function insideProfile(root: string, rel: unknown): string {
  if (typeof rel !== 'string' || rel === '' || rel.length > 1024 || BAD_CHARS.test(rel) || rel.startsWith('/')) throw badRequest('profile archive: an entry has an unsafe path');
  if (rel.split('/').some((s) => s === '' || s === '.' || s === '..')) throw badRequest('profile archive: an entry has an unsafe path');
  const full = resolve(root, rel);
  if (!full.startsWith(root + sep)) throw badRequest('profile archive: an entry has an unsafe path');
  return full;
}

/** Pulls exact byte counts out of a stream of chunks. */
class Reader {
  private buf: Buffer = Buffer.alloc(0);
  private done = false;
  constructor(private readonly it: AsyncIterator<Buffer>) {}

  private async fill(n: number): Promise<void> {
    while (this.buf.length < n && !this.done) {
      const r = await this.it.next();
      if (r.done) this.done = true;
      else this.buf = this.buf.length === 0 ? r.value : Buffer.concat([this.buf, r.value]);
    }
    if (this.buf.length < n) throw badRequest('profile archive: truncated');
  }

  async take(n: number): Promise<Buffer> {
    await this.fill(n);
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  /** Up to `max` bytes (at least 1), for copying a file's body without holding it whole. */
  async some(max: number): Promise<Buffer> {
    await this.fill(1);
    const n = Math.min(max, this.buf.length);
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  async atEnd(): Promise<boolean> {
    if (this.buf.length > 0) return false;
    if (!this.done) {
      const r = await this.it.next();
      if (r.done) this.done = true;
      else this.buf = r.value;
    }
    return this.buf.length === 0 && this.done;
  }
}

/** Writes the archive's entries under `root` (an empty dir of ours); refuses anything that is not a dir or file inside it. */
async function extract(archive: string, root: string, maxRawBytes: number): Promise<{ files: number; raw_bytes: number }> {
  const gunzip = createGunzip();
  const src = createReadStream(archive);
  src.on('error', (e) => gunzip.destroy(e));
  src.pipe(gunzip);
  const r = new Reader(gunzip[Symbol.asyncIterator]() as AsyncIterator<Buffer>);
  let files = 0;
  let raw = 0;
  try {
    if (!(await r.take(MAGIC.length)).equals(MAGIC)) throw badRequest('profile archive: not a runplane profile archive');
    for (;;) {
      const len = (await r.take(4)).readUInt32BE(0);
      if (len === 0) break;
      if (len > MAX_HEADER) throw badRequest('profile archive: an entry header is too long');
      let h: { p?: unknown; t?: unknown; s?: unknown };
      try {
        h = JSON.parse((await r.take(len)).toString('utf8')) as typeof h;
      } catch {
        throw badRequest('profile archive: an entry header is malformed');
      }
      const full = insideProfile(root, h.p);
      if (h.t === 'd') {
        await mkdir(full, { mode: 0o700 }).catch((e: NodeJS.ErrnoException) => {
          if (e.code === 'EEXIST') throw badRequest('profile archive: an entry is there twice');
          if (e.code === 'ENOENT') throw badRequest('profile archive: an entry comes before its directory');
          throw e;
        });
        continue;
      }
      if (h.t !== 'f' || typeof h.s !== 'number' || !Number.isSafeInteger(h.s) || h.s < 0) throw badRequest('profile archive: only directories and regular files may be in a profile');
      raw += h.s;
      if (raw > maxRawBytes) throw badRequest(`profile archive: unpacks to more than ${maxRawBytes} bytes`);
      // O_EXCL|O_NOFOLLOW: a second entry of one path, or a path through anything but our own dirs, fails
      const fh = await open(full, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600).catch((e: NodeJS.ErrnoException) => {
        if (e.code === 'EEXIST') throw badRequest('profile archive: an entry is there twice');
        if (e.code === 'ENOENT' || e.code === 'ENOTDIR') throw badRequest('profile archive: an entry comes before its directory');
        throw e;
      });
      try {
        let left = h.s;
        while (left > 0) {
          const piece = await r.some(Math.min(left, 1 << 20));
          await fh.write(piece);
          left -= piece.length;
        }
      } finally {
        await fh.close();
      }
      files += 1;
    }
    if (!(await r.atEnd())) throw badRequest('profile archive: bytes after its end');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'Z_DATA_ERROR' || (err as NodeJS.ErrnoException).code === 'Z_BUF_ERROR') throw badRequest('profile archive: not a gzip stream');
    throw err;
  } finally {
    src.destroy();
    gunzip.destroy();
  }
  return { files, raw_bytes: raw };
}

/**
 * Replaces the profile dir `dir` with the archive's contents, or leaves it as it was:
 * the archive is unpacked into a fresh sibling dir first, and swapped in only once
 * every entry was proven inside it. Then the whole dir is the browser user's, 0700.
 */
export async function unpackProfile(archive: string, dir: string, user: BrowserUser | undefined, maxRawBytes: number): Promise<{ files: number; raw_bytes: number }> {
  const parent = dirname(dir);
  await mkdir(parent, { recursive: true, mode: 0o711 });
  const incoming = `${dir}.incoming-${process.pid}-${Date.now().toString(36)}`;
  await mkdir(incoming, { mode: 0o700 });
  try {
    const got = await extract(archive, resolve(incoming), maxRawBytes);
    const old = `${dir}.old-${process.pid}-${Date.now().toString(36)}`;
    const had = await lstat(dir).then(() => true, () => false);
    if (had) await rename(dir, old);
    await rename(incoming, dir);
    if (had) await rm(old, { recursive: true, force: true });
    giveToBrowser(dir, user, true);
    return got;
  } catch (err) {
    await rm(incoming, { recursive: true, force: true });
    throw err;
  }
}

/** Empties the profile dir (a profile the store does not hold: the next browser starts fresh). */
export async function resetProfile(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}
