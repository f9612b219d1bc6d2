// A run's bundle files: where they live (a folder under the data dir or a key
// prefix in the bucket, inside the tenant's), reads that wait for the run's
// queued writes, and the write helpers the routes use.
import path from 'node:path';
import { stat } from 'node:fs/promises';
import { bundleJson, jsonLine } from '../../schemas/trace/index.ts';
import { UnsafeIdError, bundlePathProblem, checkId, checkKeyPrefix, resolveInside } from '../../shared/ids.ts';
import { FileStore, type ObjectStore, type Store, writeBytes } from '../../sdk/store.ts';
import { IngestError, notFound } from './http.ts';
import type { RunEntry } from './meta.ts';
import { FileWriterThread } from './file-writer.ts';
import { WriteQueue } from './write-queue.ts';

/** A run's folder name or key segment: its id URI-encoded as before (only `:` changes, to %3A); an id whose encoded form would pass 255 bytes, the file name cap, keeps its own spelling (no such folder predates this rule, and a raw `:` never appears in an encoded name). */
export const runSegment = (runId: string): string => {
  const encoded = encodeURIComponent(runId);
  return encoded.length <= 255 ? encoded : runId;
};

export class RunFiles {
  readonly queue: WriteQueue;
  /** makes the files of the runs being written, off the event loop */
  readonly writer = new FileWriterThread();
  private readonly fileStores = new Map<string, FileStore>();

  constructor(readonly opts: { dataDir: string; objectStore?: ObjectStore; queueLimit?: number; logger?: { error(m: string, f?: Record<string, unknown>): void } }) {
    this.queue = new WriteQueue(opts.queueLimit ?? 1024);
  }

  /**
   * The store of a run: bundles/<tenant>/<run segment> on the file store, or
   * the key prefix <tenant>/<run segment> in the bucket. An unsafe id, or a
   * folder that would leave the tenant's, is refused: 404 for a read, 400 for
   * a write.
   */
  storeFor(entry: Pick<RunEntry, 'tenant_id' | 'run_id'>, access: 'read' | 'write' = 'read'): Store {
    try {
      const tenant = checkId('tenant_id', entry.tenant_id);
      const run = runSegment(checkId('run_id', entry.run_id));
      if (this.opts.objectStore) return this.opts.objectStore.child(checkKeyPrefix(`${tenant}/${run}`));
      const tenantDir = resolveInside(path.join(this.opts.dataDir, 'bundles'), tenant);
      const dir = resolveInside(tenantDir, run);
      // one FileStore per run folder while it is written: it remembers the directories it made
      let store = this.fileStores.get(dir);
      if (!store) {
        if (this.fileStores.size >= 1000) this.fileStores.delete(this.fileStores.keys().next().value!);
        // written in place; TRACE_FSYNC=1: by temp file, fsync and rename (power-loss durability)
        store = new FileStore(dir, { durable: process.env.TRACE_FSYNC === '1', writer: this.writer });
        this.fileStores.set(dir, store);
      }
      return store;
    } catch (err) {
      if (!(err instanceof UnsafeIdError)) throw err;
      throw access === 'read' ? notFound(`no run: ${err.message}`) : new IngestError(400, err.message);
    }
  }

  /** A write the response does not wait for (202 routes): a failure is logged, never unhandled. */
  background(p: Promise<unknown>): void {
    p.catch((err: Error) => this.opts.logger?.error('ingest write failed', { error: err.message }));
  }

  async read(entry: RunEntry, relpath: string): Promise<Buffer> {
    const problem = bundlePathProblem(relpath);
    if (problem) throw notFound(`no such file: ${problem}`);
    await this.queue.settled(`${entry.tenant_id}/${entry.run_id}`);
    const store = this.storeFor(entry);
    try {
      return await store.readBytes(relpath);
    } catch {
      const before = await this.fileStoreBefore(entry);
      const old = before ? await before.readBytes(relpath).catch(() => undefined) : undefined;
      if (old) return old;
      throw notFound(`no file ${relpath} in run ${entry.run_id}`);
    }
  }

  async list(entry: RunEntry): Promise<string[]> {
    await this.queue.settled(`${entry.tenant_id}/${entry.run_id}`);
    const listed = await this.storeFor(entry).list();
    if (listed.length > 0) return listed;
    return (await (await this.fileStoreBefore(entry))?.list()) ?? listed;
  }

  /**
   * With an object store configured, the run's folder on the file store when it has one:
   * runs recorded before the switch stay readable there (read-through; nothing is copied).
   */
  private async fileStoreBefore(entry: RunEntry): Promise<FileStore | undefined> {
    if (!this.opts.objectStore) return undefined;
    try {
      const tenantDir = resolveInside(path.join(this.opts.dataDir, 'bundles'), checkId('tenant_id', entry.tenant_id));
      const dir = resolveInside(tenantDir, runSegment(checkId('run_id', entry.run_id)));
      return (await stat(dir).catch(() => null))?.isDirectory() ? new FileStore(dir, { durable: false }) : undefined;
    } catch {
      return undefined;
    }
  }

  static async appendText(store: Store, relpath: string, text: string, limit = Infinity): Promise<boolean> {
    if (store instanceof FileStore) return store.append(relpath, Buffer.from(text, 'utf8'), limit);
    // an object has no append: read, add, put back (the run's writes are serialized, so none is lost)
    const prior = (await store.exists(relpath)) ? await store.readBytes(relpath) : Buffer.alloc(0);
    const add = Buffer.from(text, 'utf8');
    if (prior.length + add.length > limit) return false;
    await writeBytes(store, relpath, Buffer.concat([prior, add]));
    return true;
  }

  static async putJson(store: Store, relpath: string, value: unknown): Promise<void> {
    await writeBytes(store, relpath, bundleJson(value));
  }

  static async appendLines(store: Store, relpath: string, values: unknown[]): Promise<void> {
    await RunFiles.appendText(store, relpath, values.map((v) => jsonLine(v)).join(''));
  }
}
