// The ingest service's state and storage: accounts, the run index, bundle
// files through the Store interface, a bounded write queue (its depth is a
// metric; saturated means 429), connections and intervention commands.
// Tenant and run ids are safe ids (shared/ids.ts) and each run's store is
// checked to lie inside its tenant's folder or key prefix.
import { randomBytes, randomUUID } from 'node:crypto';
import path from 'node:path';
import { stat } from 'node:fs/promises';
import { bundleJson, jsonLine } from '../../schemas/trace/index.ts';
import { UnsafeIdError, bundlePathProblem, checkId, checkKeyPrefix, idProblem, isSafeId, resolveInside } from '../../shared/ids.ts';
import { FileStore, ObjectStore, type Store, writeBytes } from '../../sdk/store.ts';
import { DUMMY_HASH, LoginLimiter, formatDsn, hashKey, hashPassword, needsRehash, newDsnKey, verifyPassword } from './auth.ts';
import { IngestError, notFound } from './http.ts';
import { MetaStore, type Command, type Connection, type Dsn, type RunEntry, type Tenant, type User } from './meta.ts';

export const LOG_FILE_LIMIT = 1024 * 1024;
export const CONNECTION_WINDOW_MS = 60_000;
export const COMMAND_TYPES = ['pause', 'resume', 'kill', 'inject_hint', 'override_action'] as const;

/** own entries only: a run id such as `constructor` is not Object.prototype's */
const own = <T>(rec: Record<string, T>, key: string): T | undefined => (Object.hasOwn(rec, key) ? rec[key] : undefined);

/** A run's folder name or key segment: its id URI-encoded as before (only `:` changes, to %3A); an id whose encoded form would pass 255 bytes, the file name cap, keeps its own spelling (no such folder predates this rule, and a raw `:` never appears in an encoded name). */
export const runSegment = (runId: string): string => {
  const encoded = encodeURIComponent(runId);
  return encoded.length <= 255 ? encoded : runId;
};

export interface IngestOptions {
  /** where bundles (file store) and meta.json live */
  dataDir: string;
  /** bundles in an S3-compatible bucket instead of dataDir/bundles */
  objectStore?: ObjectStore;
  /** pending writes at most before 429 (default 1024) */
  queueLimit?: number;
  /** JSON body cap in bytes (default 16 MiB) */
  maxBodyBytes?: number;
  /** screenshot body cap in bytes (default 20 MiB) */
  maxImageBytes?: number;
  /** session cookie lifetime (default 12 h) */
  cookieTtlSeconds?: number;
  /** Secure cookies always (they are Secure anyway on a TLS request; behind a proxy set trustProxy) */
  secureCookies?: boolean;
  /** honour X-Forwarded-Proto/For (behind a TLS-terminating proxy) */
  trustProxy?: boolean;
  /** base URL put in minted DSNs (default: the request's origin plus mountPrefix) */
  publicUrl?: string;
  /** path prefix in front of /api/v1 when mounted (e.g. /trace) */
  mountPrefix?: string;
  /** failed logins per email or address in 15 minutes before 429 (default 10) */
  loginMaxFailures?: number;
  logger?: { info(m: string, f?: Record<string, unknown>): void; warn(m: string, f?: Record<string, unknown>): void; error(m: string, f?: Record<string, unknown>): void };
}

export interface Principal {
  tenant: Tenant;
  dsn: Dsn;
  clientId: string;
}

export interface Viewer {
  user: User;
  home: Tenant;
  tenant: Tenant;
  impersonating: boolean;
}

/** Bounded queue of writes, serialized per run; its depth is exported as a metric. */
export class WriteQueue {
  depth = 0;
  rejected = 0;
  processed = 0;
  private readonly chains = new Map<string, Promise<unknown>>();

  constructor(readonly limit: number) {}

  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    if (this.depth >= this.limit) {
      this.rejected++;
      throw new IngestError(429, `ingest queue saturated (${this.depth} writes pending); retry later`, { 'Retry-After': '1' });
    }
    this.depth++;
    const prev = this.chains.get(key) ?? Promise.resolve();
    const p = prev.then(fn);
    const tail = p.then(
      () => undefined,
      () => undefined,
    ).finally(() => {
      this.depth--;
      this.processed++;
      if (this.chains.get(key) === tail) this.chains.delete(key);
    });
    this.chains.set(key, tail);
    return p;
  }

  /** resolves when every write queued so far for key has landed */
  async settled(key: string): Promise<void> {
    await this.chains.get(key);
  }

  async idle(): Promise<void> {
    while (this.chains.size) await Promise.all(this.chains.values());
  }
}

export class IngestService {
  readonly queue: WriteQueue;
  readonly limiter: LoginLimiter;
  readonly counters = new Map<string, number>();
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly dsnByHash = new Map<string, string>();

  constructor(
    readonly opts: IngestOptions,
    readonly meta: MetaStore,
  ) {
    this.queue = new WriteQueue(opts.queueLimit ?? 1024);
    this.limiter = new LoginLimiter(opts.loginMaxFailures ?? 10);
  }

  static async open(opts: IngestOptions): Promise<IngestService> {
    const meta = await MetaStore.open(path.join(opts.dataDir, 'meta.json'));
    return new IngestService(opts, meta);
  }

  count(kind: string, n = 1): void {
    this.counters.set(kind, (this.counters.get(kind) ?? 0) + n);
  }

  // ---------------------------------------------------------------- accounts

  async createTenant(tenantId: string, opts: { name?: string; modelioEnabled?: boolean } = {}): Promise<Tenant> {
    await this.meta.reload(true);
    const problem = idProblem('tenant_id', tenantId);
    if (problem) throw new IngestError(400, problem);
    if (own(this.meta.data.tenants, tenantId)) throw new IngestError(409, `tenant ${tenantId} exists`);
    const t: Tenant = { tenant_id: tenantId, name: opts.name ?? tenantId, modelio_enabled: opts.modelioEnabled ?? false, created_at: new Date().toISOString() };
    this.meta.data.tenants[tenantId] = t;
    await this.meta.save();
    return t;
  }

  async setTenantModelio(tenantId: string, enabled: boolean): Promise<Tenant> {
    await this.meta.reload(true);
    const t = this.meta.data.tenants[tenantId];
    if (!t) throw notFound(`no tenant ${tenantId}`);
    t.modelio_enabled = enabled;
    await this.meta.save();
    return t;
  }

  async createUser(email: string, password: string, tenantId: string, isAdmin = false): Promise<User> {
    await this.meta.reload(true);
    const norm = email.trim().toLowerCase();
    if (!/^[^@\s]+@[^@\s]+$/.test(norm)) throw new IngestError(422, 'email is not an address');
    if (password.length < 8) throw new IngestError(422, 'password must be at least 8 characters');
    if (!this.meta.data.tenants[tenantId]) throw notFound(`no tenant ${tenantId}`);
    if (Object.values(this.meta.data.users).some((u) => u.email === norm)) throw new IngestError(409, `user ${norm} exists`);
    const u: User = { user_id: `usr_${randomBytes(8).toString('hex')}`, email: norm, password_hash: await hashPassword(password), tenant_id: tenantId, is_admin: isAdmin, created_at: new Date().toISOString() };
    this.meta.data.users[u.user_id] = u;
    await this.meta.save();
    return u;
  }

  /** Mints a DSN: the plaintext key (and DSN URL) is returned here only; the store keeps its hash. */
  async mintDsn(tenantId: string, name: string, baseUrl: string): Promise<{ record: Dsn; key: string; dsn: string }> {
    await this.meta.reload(true);
    if (!this.meta.data.tenants[tenantId]) throw notFound(`no tenant ${tenantId}`);
    if (!name || name.length > 100) throw new IngestError(422, 'name must be 1-100 characters');
    const key = newDsnKey();
    const record: Dsn = { dsn_id: `dsn_${randomBytes(8).toString('hex')}`, tenant_id: tenantId, name, key_hash: hashKey(key), key_prefix: key.slice(0, 7), created_at: new Date().toISOString(), last_used_at: null, revoked_at: null };
    this.meta.data.dsns[record.dsn_id] = record;
    await this.meta.save();
    return { record, key, dsn: formatDsn(baseUrl, key) };
  }

  /**
   * Revokes a DSN (of `tenantId` when given, else of any tenant): its key is
   * refused with 403 from then on, by this process at once and by another one
   * sharing the data dir once it re-reads the metadata file (every ingest call
   * schedules a save, which folds in the file's changes first). Revoking again
   * keeps the first revoked_at. 404 for an unknown DSN.
   */
  async revokeDsn(dsnId: string, tenantId?: string): Promise<Dsn> {
    await this.meta.reload(true);
    const d = Object.hasOwn(this.meta.data.dsns, dsnId) ? this.meta.data.dsns[dsnId] : undefined;
    if (!d || (tenantId !== undefined && d.tenant_id !== tenantId)) throw notFound('no such DSN');
    if (d.revoked_at) return d;
    const revoked: Dsn = { ...d, revoked_at: new Date().toISOString() };
    this.meta.data.dsns[dsnId] = revoked;
    await this.meta.save();
    return revoked;
  }

  publicDsn(d: Dsn): Omit<Dsn, 'key_hash'> {
    const { key_hash: _h, ...rest } = d;
    return rest;
  }

  async login(email: string, password: string, address: string): Promise<User> {
    const keys = [`email:${email.trim().toLowerCase()}`, `addr:${address}`];
    const wait = this.limiter.retryAfter(keys);
    if (wait > 0) throw new IngestError(429, 'too many failed logins; retry later', { 'Retry-After': String(wait) });
    await this.meta.reload();
    const user = Object.values(this.meta.data.users).find((u) => u.email === email.trim().toLowerCase());
    const ok = await verifyPassword(password, user?.password_hash ?? DUMMY_HASH);
    if (!user || !ok) {
      this.limiter.fail(keys);
      throw new IngestError(401, 'invalid email or password');
    }
    this.limiter.succeed(keys);
    if (needsRehash(user.password_hash)) {
      // the password is known only now: the stored hash moves to today's parameters
      user.password_hash = await hashPassword(password);
      await this.meta.save();
    }
    return user;
  }

  /** The tenant of a DSN key; 403 when the key is not recognised. */
  async principal(key: string, clientId: string | undefined): Promise<Principal> {
    const h = hashKey(key);
    let dsnId = this.dsnByHash.get(h);
    if (!dsnId || !this.meta.data.dsns[dsnId]) {
      await this.meta.reload();
      dsnId = Object.values(this.meta.data.dsns).find((d) => d.key_hash === h)?.dsn_id;
      if (dsnId) this.dsnByHash.set(h, dsnId);
    }
    const dsn = dsnId ? this.meta.data.dsns[dsnId] : undefined;
    const tenant = dsn ? this.meta.data.tenants[dsn.tenant_id] : undefined;
    if (!dsn || dsn.revoked_at || !tenant) throw new IngestError(403, 'DSN key not recognised');
    const cid = clientId && clientId.length <= 200 ? clientId : dsn.dsn_id;
    this.touchConnection(tenant.tenant_id, cid, dsn.dsn_id, {});
    return { tenant, dsn, clientId: cid };
  }

  // ---------------------------------------------------------------- connections

  touchConnection(tenantId: string, clientId: string, dsnId: string, fields: Partial<Connection>): void {
    const key = `${tenantId}/${clientId}`;
    const now = new Date().toISOString();
    const prior = this.meta.data.connections[key];
    const c: Connection = prior ?? { tenant_id: tenantId, client_id: clientId, dsn_id: dsnId, client_name: null, client_version: null, capture_mode: null, run_id: null, last_event: null, last_seen: now, calls: 0 };
    Object.assign(c, fields, { last_seen: now, calls: c.calls + 1 });
    this.meta.data.connections[key] = c;
    const dsn = this.meta.data.dsns[dsnId];
    if (dsn) dsn.last_used_at = now;
    this.meta.saveSoon();
  }

  connections(tenantId: string, now = Date.now()): Connection[] {
    const out: Connection[] = [];
    for (const [k, c] of Object.entries(this.meta.data.connections)) {
      if (now - Date.parse(c.last_seen) > CONNECTION_WINDOW_MS) {
        if (now - Date.parse(c.last_seen) > 24 * 3600_000) delete this.meta.data.connections[k];
        continue;
      }
      if (c.tenant_id === tenantId) out.push(c);
    }
    return out.sort((a, b) => b.last_seen.localeCompare(a.last_seen));
  }

  // ---------------------------------------------------------------- runs and files

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
      return new FileStore(resolveInside(tenantDir, run), { durable: false });
    } catch (err) {
      if (!(err instanceof UnsafeIdError)) throw err;
      throw access === 'read' ? notFound(`no run: ${err.message}`) : new IngestError(400, err.message);
    }
  }

  /** The run for an ingest call: created for this tenant when new; 404 when another tenant owns it; 400 for an unsafe run id. */
  claimRun(tenantId: string, runId: string): { entry: RunEntry; created: boolean } {
    const problem = idProblem('run_id', runId);
    if (problem) throw new IngestError(400, problem);
    const entry = own(this.meta.data.runs, runId);
    if (entry) {
      if (entry.tenant_id !== tenantId) throw notFound(`no run ${runId}`);
      return { entry, created: false };
    }
    const now = new Date().toISOString();
    const e: RunEntry = { run_id: runId, tenant_id: tenantId, created_at: now, updated_at: now, status: null, client_name: null, debug_session_id: null, step_count: 0, parent_run_id: null, group_id: null, session_type: null, canonical: {} };
    this.meta.data.runs[runId] = e;
    this.meta.saveSoon();
    return { entry: e, created: true };
  }

  /** The run for a read: 404 unless the active tenant owns it (an unsafe id, even one indexed before ids were checked, is no run). */
  readableRun(tenantId: string, runId: string): RunEntry {
    const entry = isSafeId(runId) ? own(this.meta.data.runs, runId) : undefined;
    if (!entry || entry.tenant_id !== tenantId) throw notFound(`no run ${runId}`);
    return entry;
  }

  /** Queues a write on the run (serialized per run, bounded overall). */
  write<T>(entry: RunEntry, fn: (store: Store) => Promise<T>): Promise<T> {
    const store = this.storeFor(entry, 'write');
    return this.queue.run(`${entry.tenant_id}/${entry.run_id}`, async () => {
      const out = await fn(store);
      entry.updated_at = new Date().toISOString();
      this.meta.saveSoon();
      return out;
    });
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
    await IngestService.appendText(store, relpath, values.map((v) => jsonLine(v)).join(''));
  }

  // ---------------------------------------------------------------- commands

  enqueueCommand(entry: RunEntry, type: string, payload: Record<string, unknown>, operatorId: string | null): Command {
    const list = own(this.meta.data.commands, entry.run_id) ?? (this.meta.data.commands[entry.run_id] = []);
    const c: Command = { command_id: `cmd_${randomUUID()}`, seq: list.length + 1, type, payload, operator_id: operatorId, issued_at: new Date().toISOString() };
    list.push(c);
    if (list.length > 1000) list.splice(0, list.length - 1000);
    this.meta.saveSoon();
    for (const wake of this.waiters.get(entry.run_id) ?? []) wake();
    return c;
  }

  /** Commands after the cursor (their seq), waiting up to timeoutMs for the first one. */
  async pollCommands(entry: RunEntry, cursor: number, timeoutMs: number, signal: AbortSignal): Promise<{ commands: Command[]; cursor: number }> {
    const pending = () => (own(this.meta.data.commands, entry.run_id) ?? []).filter((c) => c.seq > cursor);
    let found = pending();
    if (!found.length && timeoutMs > 0) {
      await new Promise<void>((resolve) => {
        const set = this.waiters.get(entry.run_id) ?? new Set();
        this.waiters.set(entry.run_id, set);
        const done = () => {
          clearTimeout(t);
          set.delete(done);
          if (!set.size) this.waiters.delete(entry.run_id);
          signal.removeEventListener('abort', done);
          resolve();
        };
        const t = setTimeout(done, timeoutMs);
        set.add(done);
        signal.addEventListener('abort', done, { once: true });
      });
      found = pending();
    }
    return { commands: found, cursor: found.length ? found[found.length - 1]!.seq : cursor };
  }

  async close(): Promise<void> {
    for (const set of this.waiters.values()) for (const wake of set) wake();
    await this.queue.idle();
    await this.meta.close();
  }
}
