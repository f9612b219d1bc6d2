// The ingest service's state: accounts, DSNs and sessions, the run index,
// connections and intervention commands, in the metadata store (meta/store.ts);
// bundle files are RunFiles' (run-files.ts). Tenant and run ids are safe ids
// (shared/ids.ts).
import { randomBytes, randomUUID } from 'node:crypto';
import { idProblem, isSafeId } from '../../shared/ids.ts';
import type { RecordCategory } from '../../sdk/categories.ts';
import type { ObjectStore, Store } from '../../sdk/store.ts';
import { dummyHash, formatDsn, hashKey, hashPassword, needsRehash, newDsnKey, verifyPassword } from './auth.ts';
import { IngestError, notFound } from './http.ts';
import { IngestLimits, type CategoryLimit } from './limits.ts';
import type { Command, Connection, Dsn, RunEntry, Tenant, User } from './meta.ts';
import { openMeta } from './meta/open.ts';
import type { MetaStore } from './meta/store.ts';
import { RunFiles } from './run-files.ts';
import type { WriteFrom } from './write-queue.ts';

export { runSegment } from './run-files.ts';
export { WriteQueue } from './write-queue.ts';

export const LOG_FILE_LIMIT = 1024 * 1024;
export const CONNECTION_WINDOW_MS = 60_000;
export const COMMAND_TYPES = ['pause', 'resume', 'kill', 'inject_hint', 'override_action'] as const;
/** run entries kept in memory by default (the routes of one run share one object between their writes) */
const RUN_CACHE = 10_000;

export interface IngestOptions {
  /** where bundles (file store) and the SQLite metadata live */
  dataDir: string;
  /** PostgreSQL for the metadata instead of SQLite in dataDir (TRACE_DATABASE_URL) */
  databaseUrl?: string;
  /** bundles in an S3-compatible bucket instead of dataDir/bundles */
  objectStore?: ObjectStore;
  /** pending writes at most before 429 (default 1024) */
  queueLimit?: number;
  /** run index entries kept in memory, the least recently claimed dropped first (default 10,000) */
  runCacheSize?: number;
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
  /** failed logins per email (ten times as many per address) in 15 minutes before 429 (default 10; TRACE_LOGIN_MAX_FAILURES) */
  loginMaxFailures?: number;
  /** keys each login limiter keeps in memory (TRACE_LOGIN_MEMORY_KEYS, default 65536); past it, keys share buckets */
  loginMemoryKeys?: number;
  /** Redis the rate limits of every replica count in (TRACE_REDIS_URL; mounted in the gateway, SERVICE_REDIS_URL); else per process */
  redisUrl?: string;
  /** records per tenant per category (limits.ts DEFAULT_CATEGORY_LIMITS; TRACE_RATE_LIMITS) */
  rateLimits?: Partial<Record<RecordCategory, CategoryLimit>>;
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

export class IngestService extends RunFiles {
  readonly limits: IngestLimits;
  readonly counters = new Map<string, number>();
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly runCache = new Map<string, RunEntry>();
  /** connection touches not yet written: every ingest call is one, so they are written in batches */
  private readonly touched = new Map<string, Connection>();
  private readonly dsnUsed = new Map<string, string>();
  private flushTimer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    override readonly opts: IngestOptions,
    readonly meta: MetaStore,
    readonly cookieSecret: string,
  ) {
    super(opts);
    this.limits = new IngestLimits(opts);
  }

  static async open(opts: IngestOptions): Promise<IngestService> {
    const { meta, imported } = await openMeta(opts.dataDir, opts.databaseUrl);
    if (imported) opts.logger?.info('trace metadata imported from the JSON file of an earlier version', { moved_to: imported });
    const svc = new IngestService(opts, meta, await meta.cookieSecret());
    await svc.limits.connected(3000);
    return svc;
  }

  count(kind: string, n = 1): void {
    this.counters.set(kind, (this.counters.get(kind) ?? 0) + n);
  }

  // ---------------------------------------------------------------- accounts

  async createTenant(tenantId: string, opts: { name?: string; modelioEnabled?: boolean } = {}): Promise<Tenant> {
    const problem = idProblem('tenant_id', tenantId);
    if (problem) throw new IngestError(400, problem);
    const t: Tenant = { tenant_id: tenantId, name: opts.name ?? tenantId, modelio_enabled: opts.modelioEnabled ?? false, created_at: new Date().toISOString() };
    if (!(await this.meta.addTenant(t))) throw new IngestError(409, `tenant ${tenantId} exists`);
    return t;
  }

  async setTenantModelio(tenantId: string, enabled: boolean): Promise<Tenant> {
    const t = await this.meta.setTenantModelio(tenantId, enabled);
    if (!t) throw notFound(`no tenant ${tenantId}`);
    return t;
  }

  async createUser(email: string, password: string, tenantId: string, isAdmin = false): Promise<User> {
    const norm = email.trim().toLowerCase();
    if (!/^[^@\s]+@[^@\s]+$/.test(norm)) throw new IngestError(422, 'email is not an address');
    if (password.length < 8) throw new IngestError(422, 'password must be at least 8 characters');
    if (!(await this.meta.tenant(tenantId))) throw notFound(`no tenant ${tenantId}`);
    if (await this.meta.userByEmail(norm)) throw new IngestError(409, `user ${norm} exists`);
    const u: User = { user_id: `usr_${randomBytes(8).toString('hex')}`, email: norm, password_hash: await hashPassword(password), tenant_id: tenantId, is_admin: isAdmin, created_at: new Date().toISOString() };
    if (!(await this.meta.addUser(u))) throw new IngestError(409, `user ${norm} exists`);
    return u;
  }

  /** Deletes a user (by id or e-mail): their session cookies are refused from then on. 404 for an unknown user. */
  async deleteUser(idOrEmail: string): Promise<User> {
    const u = (await this.meta.user(idOrEmail)) ?? (await this.meta.userByEmail(idOrEmail.trim().toLowerCase()));
    if (!u || !(await this.meta.deleteUser(u.user_id))) throw notFound('no such user');
    return u;
  }

  /** Mints a DSN: the plaintext key (and DSN URL) is returned here only; the store keeps its hash. */
  async mintDsn(tenantId: string, name: string, baseUrl: string): Promise<{ record: Dsn; key: string; dsn: string }> {
    if (!(await this.meta.tenant(tenantId))) throw notFound(`no tenant ${tenantId}`);
    if (!name || name.length > 100) throw new IngestError(422, 'name must be 1-100 characters');
    const key = newDsnKey();
    const record: Dsn = { dsn_id: `dsn_${randomBytes(8).toString('hex')}`, tenant_id: tenantId, name, key_hash: hashKey(key), key_prefix: key.slice(0, 7), created_at: new Date().toISOString(), last_used_at: null, revoked_at: null };
    await this.meta.addDsn(record);
    return { record, key, dsn: formatDsn(baseUrl, key) };
  }

  /**
   * Revokes a DSN (of `tenantId` when given, else of any tenant): its key is
   * refused with 403 from then on, by every process on the same metadata
   * database at its next call (keys are looked up per call). Revoking again
   * keeps the first revoked_at. 404 for an unknown DSN.
   */
  async revokeDsn(dsnId: string, tenantId?: string): Promise<Dsn> {
    const d = await this.meta.dsn(dsnId);
    if (!d || (tenantId !== undefined && d.tenant_id !== tenantId)) throw notFound('no such DSN');
    return (await this.meta.revokeDsn(dsnId, new Date().toISOString()))!;
  }

  publicDsn(d: Dsn): Omit<Dsn, 'key_hash'> {
    const { key_hash: _h, ...rest } = d;
    return rest;
  }

  async login(email: string, password: string, address: string): Promise<User> {
    const norm = email.trim().toLowerCase();
    // the attempt counts before the password is checked (parallel guesses cannot slip past)
    await this.limits.beginLogin(norm, address);
    const user = await this.meta.userByEmail(norm);
    const ok = await verifyPassword(password, user?.password_hash ?? dummyHash());
    if (!user || !ok) throw new IngestError(401, 'invalid email or password');
    await this.limits.loginSucceeded(norm, address);
    if (needsRehash(user.password_hash)) {
      // the password is known only now: the stored hash moves to today's parameters
      user.password_hash = await hashPassword(password);
      await this.meta.setPasswordHash(user.user_id, user.password_hash);
    }
    return user;
  }

  /** The tenant of a DSN key; 403 when the key is not recognised. */
  async principal(key: string, clientId: string | undefined): Promise<Principal> {
    const dsn = await this.meta.dsnByHash(hashKey(key));
    const tenant = dsn && !dsn.revoked_at ? await this.meta.tenant(dsn.tenant_id) : undefined;
    if (!dsn || dsn.revoked_at || !tenant) throw new IngestError(403, 'DSN key not recognised');
    const cid = clientId && clientId.length <= 200 ? clientId : dsn.dsn_id;
    await this.touchConnection(tenant.tenant_id, cid, dsn.dsn_id, {});
    return { tenant, dsn, clientId: cid };
  }

  // ---------------------------------------------------------------- connections

  /** Counts a call of a client; written within a second (a heartbeat, not a record the SDK needs back). */
  async touchConnection(tenantId: string, clientId: string, dsnId: string, fields: Partial<Connection>): Promise<void> {
    const key = `${tenantId}/${clientId}`;
    const now = new Date().toISOString();
    const prior = this.touched.get(key) ?? (await this.meta.connection(tenantId, clientId));
    const c: Connection = prior ?? { tenant_id: tenantId, client_id: clientId, dsn_id: dsnId, client_name: null, client_version: null, capture_mode: null, run_id: null, last_event: null, last_seen: now, calls: 0 };
    Object.assign(c, fields, { last_seen: now, calls: c.calls + 1 });
    this.touched.set(key, c);
    this.dsnUsed.set(dsnId, now);
    this.flushTimer ??= setTimeout(() => void this.flushConnections().catch((err: Error) => this.opts.logger?.error('connection write failed', { error: err.message })), 1000).unref();
  }

  async forgetConnection(tenantId: string, clientId: string): Promise<void> {
    this.touched.delete(`${tenantId}/${clientId}`);
    await this.meta.deleteConnection(tenantId, clientId);
  }

  flushConnections(): Promise<void> {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    const cs = [...this.touched.values()];
    const used = [...this.dsnUsed];
    this.touched.clear();
    this.dsnUsed.clear();
    this.flushing = this.flushing.then(async () => {
      await this.meta.saveConnections(cs);
      for (const [id, at] of used) await this.meta.dsnUsed(id, at);
    });
    return this.flushing;
  }

  async connections(tenantId: string, now = Date.now()): Promise<Connection[]> {
    await this.flushConnections();
    return this.meta.connections(tenantId, new Date(now - CONNECTION_WINDOW_MS).toISOString());
  }

  // ---------------------------------------------------------------- the run index

  private cached(e: RunEntry): RunEntry {
    const have = this.runCache.get(e.run_id);
    if (have) return have;
    if (this.runCache.size >= (this.opts.runCacheSize ?? RUN_CACHE)) this.runCache.delete(this.runCache.keys().next().value!);
    this.runCache.set(e.run_id, e);
    return e;
  }

  /** The run for an ingest call: created (and committed) for this tenant when new; 404 when another tenant owns it; 400 for an unsafe run id. */
  async claimRun(tenantId: string, runId: string): Promise<{ entry: RunEntry; created: boolean }> {
    const problem = idProblem('run_id', runId);
    if (problem) throw new IngestError(400, problem);
    const have = this.runCache.get(runId);
    if (have) {
      if (have.tenant_id !== tenantId) throw notFound(`no run ${runId}`);
      // claimed again: to the back of the eviction order, so a run still being written keeps its one entry
      this.runCache.delete(runId);
      this.runCache.set(runId, have);
      return { entry: have, created: false };
    }
    const now = new Date().toISOString();
    const fresh: RunEntry = { run_id: runId, tenant_id: tenantId, created_at: now, updated_at: now, status: null, client_name: null, debug_session_id: null, step_count: 0, parent_run_id: null, group_id: null, session_type: null, canonical: {} };
    const { entry, created } = await this.meta.claimRun(fresh);
    if (entry.tenant_id !== tenantId) throw notFound(`no run ${runId}`);
    return { entry: this.cached(entry), created };
  }

  /** The run for a read: 404 unless the active tenant owns it (an unsafe id, even one indexed before ids were checked, is no run). */
  async readableRun(tenantId: string, runId: string): Promise<RunEntry> {
    const entry = isSafeId(runId) ? (this.runCache.get(runId) ?? (await this.meta.run(runId))) : undefined;
    if (!entry || entry.tenant_id !== tenantId) throw notFound(`no run ${runId}`);
    return entry;
  }

  /** Writes the fields of the run's index entry a manifest or trace document sets. */
  saveRun(entry: RunEntry): Promise<void> {
    return this.meta.saveRun(entry);
  }

  /**
   * Queues a write on the run (serialized per run, bounded overall). Before it
   * resolves, the run's index entry is committed with the write's time and at
   * least `stepCount` steps; concurrent writes share that commit (group commit).
   * The run's next write does not wait for that commit, only for this file, so
   * the touches of a batch's writes meet in one commit (one statement a run);
   * inside a batch the commit is awaited by the batch, before its answer.
   * `from`: the route's category and batch scope (a RouteCtx). `lane`: the one
   * file fn writes, when no other kind of write touches it (WriteQueue.run).
   */
  async write<T>(from: WriteFrom, entry: RunEntry, fn: (store: Store) => Promise<T>, opts: { stepCount?: number; lane?: string } = {}): Promise<T> {
    const store = this.storeFor(entry, 'write');
    const stepCount = opts.stepCount ?? 0;
    const landed = this.queue.run(`${entry.tenant_id}/${entry.run_id}`, () => fn(store), { lane: opts.lane, category: from.category });
    const batch = from.batch;
    batch?.queued?.();
    const out = await landed;
    entry.updated_at = new Date().toISOString();
    entry.step_count = Math.max(entry.step_count, stepCount);
    const touched = this.meta.touchRun(entry.run_id, entry.updated_at, stepCount);
    if (!batch) await touched;
    // a touch that lands after the batch's answer (a 202 record's) is not awaited there: as a value, it is no unhandled rejection
    else batch.commits.push(touched.then(() => null, (err: Error) => err));
    return out;
  }

  /** The canonical step_id at `index` (the first one any replica stored there); cached on the entry, since it never changes. */
  async canonicalStep(entry: RunEntry, index: number, stepId: string): Promise<string> {
    const known = entry.canonical[index];
    if (known) return known;
    const canonical = await this.meta.claimStep(entry.run_id, index, stepId);
    entry.canonical[index] = canonical;
    return canonical;
  }

  // ---------------------------------------------------------------- commands

  async enqueueCommand(entry: RunEntry, type: string, payload: Record<string, unknown>, operatorId: string | null): Promise<Command> {
    const c = await this.meta.addCommand(entry.run_id, { command_id: `cmd_${randomUUID()}`, type, payload, operator_id: operatorId, issued_at: new Date().toISOString() });
    for (const wake of this.waiters.get(entry.run_id) ?? []) wake();
    return c;
  }

  /** Commands after the cursor (their seq), waiting up to timeoutMs for the first one. */
  async pollCommands(entry: RunEntry, cursor: number, timeoutMs: number, signal: AbortSignal): Promise<{ commands: Command[]; cursor: number }> {
    let found = await this.meta.commandsAfter(entry.run_id, cursor);
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
      found = await this.meta.commandsAfter(entry.run_id, cursor);
    }
    return { commands: found, cursor: found.length ? found[found.length - 1]!.seq : cursor };
  }

  async close(): Promise<void> {
    for (const set of this.waiters.values()) for (const wake of set) wake();
    await this.queue.idle();
    await this.writer.close();
    await this.flushConnections().catch(() => undefined);
    await this.meta.close();
    await this.limits.close();
  }
}
