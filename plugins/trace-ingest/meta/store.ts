// The metadata store: every read and write of tenants, users, DSNs, sessions,
// the run index, commands, connections and preferences, as async calls over
// SQLite or PostgreSQL (db.ts). Each write is committed before it resolves, so
// what the service acknowledged survives a crash, and the operator CLI (another
// process on the same database) is seen by a running service at its next query.
import { randomBytes } from 'node:crypto';
import type { Command, Connection, Dsn, Preference, RunEntry, Tenant, User } from '../meta.ts';
import type { MetaDb, Sql } from './db.ts';

type Row = Record<string, unknown>;

const str = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));
const tenant = (r: Row): Tenant => ({ tenant_id: String(r.tenant_id), name: String(r.name), modelio_enabled: Number(r.modelio_enabled) === 1, created_at: String(r.created_at) });
const user = (r: Row): User => ({ user_id: String(r.user_id), email: String(r.email), password_hash: String(r.password_hash), tenant_id: String(r.tenant_id), is_admin: Number(r.is_admin) === 1, created_at: String(r.created_at) });
const dsn = (r: Row): Dsn => ({ dsn_id: String(r.dsn_id), tenant_id: String(r.tenant_id), name: String(r.name), key_hash: String(r.key_hash), key_prefix: String(r.key_prefix), created_at: String(r.created_at), last_used_at: str(r.last_used_at), revoked_at: str(r.revoked_at) });
const run = (r: Row): RunEntry => ({
  run_id: String(r.run_id), tenant_id: String(r.tenant_id), created_at: String(r.created_at), updated_at: String(r.updated_at), status: str(r.status), client_name: str(r.client_name),
  debug_session_id: str(r.debug_session_id), step_count: Number(r.step_count), parent_run_id: str(r.parent_run_id), group_id: str(r.group_id), session_type: str(r.session_type),
  canonical: JSON.parse(String(r.canonical)) as Record<string, string>,
});
const command = (r: Row): Command => ({ command_id: String(r.command_id), seq: Number(r.seq), type: String(r.type), payload: JSON.parse(String(r.payload)) as Record<string, unknown>, operator_id: str(r.operator_id), issued_at: String(r.issued_at) });
const connection = (r: Row): Connection => ({
  tenant_id: String(r.tenant_id), client_id: String(r.client_id), dsn_id: String(r.dsn_id), client_name: str(r.client_name), client_version: str(r.client_version), capture_mode: str(r.capture_mode),
  run_id: str(r.run_id), last_event: str(r.last_event), last_seen: String(r.last_seen), calls: Number(r.calls),
});
const preference = (r: Row): Preference => ({
  preference_id: String(r.preference_id), tenant_id: String(r.tenant_id), run_id_a: String(r.run_id_a), run_id_b: String(r.run_id_b), preferred: String(r.preferred) as Preference['preferred'],
  step_index: r.step_index === null || r.step_index === undefined ? null : Number(r.step_index), rationale: str(r.rationale), user_id: String(r.user_id), created_at: String(r.created_at),
});

/** Where a page of runs starts: after this run in (created_at, run_id) order, newest first. */
export interface RunsAfter {
  created_at: string;
  run_id: string;
}

/** Commands kept per run (the oldest beyond are dropped). */
export const COMMANDS_KEPT = 1000;

export const insertTenant = (q: Sql, t: Tenant) =>
  q.run('INSERT INTO trace_tenants (tenant_id, name, modelio_enabled, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING', [t.tenant_id, t.name, t.modelio_enabled ? 1 : 0, t.created_at]);
export const insertUser = (q: Sql, u: User) =>
  q.run('INSERT INTO trace_users (user_id, email, password_hash, tenant_id, is_admin, created_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING', [u.user_id, u.email, u.password_hash, u.tenant_id, u.is_admin ? 1 : 0, u.created_at]);
export const insertDsn = (q: Sql, d: Dsn) =>
  q.run('INSERT INTO trace_dsns (dsn_id, tenant_id, name, key_hash, key_prefix, created_at, last_used_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING', [d.dsn_id, d.tenant_id, d.name, d.key_hash, d.key_prefix, d.created_at, d.last_used_at, d.revoked_at]);
const CLAIM_STEP = 'INSERT INTO trace_run_steps (run_id, step_index, step_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING';
/** Inserts a run (and its canonical step ids, kept in trace_run_steps); 0 when it exists. */
export async function insertRun(q: Sql, e: RunEntry): Promise<number> {
  const n = await q.run(
    'INSERT INTO trace_runs (run_id, tenant_id, created_at, updated_at, status, client_name, debug_session_id, step_count, parent_run_id, group_id, session_type, canonical) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING',
    [e.run_id, e.tenant_id, e.created_at, e.updated_at, e.status, e.client_name, e.debug_session_id, e.step_count, e.parent_run_id, e.group_id, e.session_type, '{}'],
  );
  for (const [idx, stepId] of Object.entries(e.canonical)) if (/^\d+$/.test(idx)) await q.run(CLAIM_STEP, [e.run_id, Number(idx), stepId]);
  return n;
}
/** Moves updated_at and step_count forward, never back: replicas writing one run in any order agree. */
const TOUCH_RUN =
  'UPDATE trace_runs SET updated_at = CASE WHEN updated_at < $2 THEN $2 ELSE updated_at END, step_count = CASE WHEN step_count < $3 THEN $3 ELSE step_count END WHERE run_id = $1';
export const insertCommand = (q: Sql, runId: string, c: Command) =>
  q.run('INSERT INTO trace_commands (run_id, seq, command_id, type, payload, operator_id, issued_at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING', [runId, c.seq, c.command_id, c.type, JSON.stringify(c.payload), c.operator_id, c.issued_at]);
export const upsertConnection = (q: Sql, c: Connection) =>
  q.run(
    `INSERT INTO trace_connections (tenant_id, client_id, dsn_id, client_name, client_version, capture_mode, run_id, last_event, last_seen, calls) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (tenant_id, client_id) DO UPDATE SET dsn_id = excluded.dsn_id, client_name = excluded.client_name, client_version = excluded.client_version, capture_mode = excluded.capture_mode,
       run_id = excluded.run_id, last_event = excluded.last_event, last_seen = excluded.last_seen, calls = excluded.calls`,
    [c.tenant_id, c.client_id, c.dsn_id, c.client_name, c.client_version, c.capture_mode, c.run_id, c.last_event, c.last_seen, c.calls],
  );
export const insertPreference = (q: Sql, p: Preference) =>
  q.run('INSERT INTO trace_preferences (preference_id, tenant_id, run_id_a, run_id_b, preferred, step_index, rationale, user_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING', [
    p.preference_id, p.tenant_id, p.run_id_a, p.run_id_b, p.preferred, p.step_index, p.rationale, p.user_id, p.created_at,
  ]);
export const revokeSession = (q: Sql, sid: string, exp: number) =>
  q.run('INSERT INTO trace_revoked_sessions (sid, expires_at) VALUES ($1, $2) ON CONFLICT DO NOTHING', [sid, Math.floor(exp)]);

export class MetaStore {
  /** touches of a run not yet read by the group commit they wait for */
  private readonly touches = new Map<string, { at: string; stepCount: number; done: Promise<number> }>();
  private readonly inflight = new Set<Promise<number>>();

  constructor(readonly db: MetaDb) {}

  /** The key cookies are signed with: made once, kept in the database. */
  async cookieSecret(): Promise<string> {
    await this.db.run('INSERT INTO trace_settings (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING', ['cookie_secret', randomBytes(32).toString('base64url')]);
    return (await this.setting('cookie_secret'))!;
  }

  async setting(key: string): Promise<string | undefined> {
    return (await this.db.all<Row>('SELECT value FROM trace_settings WHERE key = $1', [key]))[0]?.value as string | undefined;
  }

  // -------------------------------------------------------------- tenants, users

  async tenant(id: string): Promise<Tenant | undefined> {
    const r = (await this.db.all<Row>('SELECT * FROM trace_tenants WHERE tenant_id = $1', [id]))[0];
    return r && tenant(r);
  }
  async tenants(): Promise<Tenant[]> {
    return (await this.db.all<Row>('SELECT * FROM trace_tenants ORDER BY tenant_id')).map(tenant);
  }
  /** false when the tenant exists */
  async addTenant(t: Tenant): Promise<boolean> {
    return (await insertTenant(this.db, t)) === 1;
  }
  async setTenantModelio(id: string, enabled: boolean): Promise<Tenant | undefined> {
    await this.db.run('UPDATE trace_tenants SET modelio_enabled = $2 WHERE tenant_id = $1', [id, enabled ? 1 : 0]);
    return this.tenant(id);
  }

  async user(id: string): Promise<User | undefined> {
    const r = (await this.db.all<Row>('SELECT * FROM trace_users WHERE user_id = $1', [id]))[0];
    return r && user(r);
  }
  async userByEmail(email: string): Promise<User | undefined> {
    const r = (await this.db.all<Row>('SELECT * FROM trace_users WHERE email = $1', [email]))[0];
    return r && user(r);
  }
  async users(): Promise<User[]> {
    return (await this.db.all<Row>('SELECT * FROM trace_users ORDER BY created_at, user_id')).map(user);
  }
  /** false when the e-mail or id is taken */
  async addUser(u: User): Promise<boolean> {
    return (await insertUser(this.db, u)) === 1;
  }
  async setPasswordHash(id: string, hash: string): Promise<void> {
    await this.db.run('UPDATE trace_users SET password_hash = $2 WHERE user_id = $1', [id, hash]);
  }
  /** false when there was no such user */
  async deleteUser(id: string): Promise<boolean> {
    return (await this.db.run('DELETE FROM trace_users WHERE user_id = $1', [id])) === 1;
  }

  // -------------------------------------------------------------- DSNs, sessions

  async dsn(id: string): Promise<Dsn | undefined> {
    const r = (await this.db.all<Row>('SELECT * FROM trace_dsns WHERE dsn_id = $1', [id]))[0];
    return r && dsn(r);
  }
  async dsnByHash(keyHash: string): Promise<Dsn | undefined> {
    const r = (await this.db.all<Row>('SELECT * FROM trace_dsns WHERE key_hash = $1', [keyHash]))[0];
    return r && dsn(r);
  }
  async dsns(tenantId?: string): Promise<Dsn[]> {
    const rows = tenantId === undefined ? await this.db.all<Row>('SELECT * FROM trace_dsns ORDER BY created_at, dsn_id') : await this.db.all<Row>('SELECT * FROM trace_dsns WHERE tenant_id = $1 ORDER BY created_at, dsn_id', [tenantId]);
    return rows.map(dsn);
  }
  async addDsn(d: Dsn): Promise<void> {
    await insertDsn(this.db, d);
  }
  /** Sets revoked_at unless it is set already (the first revoke's time stays). */
  async revokeDsn(id: string, at: string): Promise<Dsn | undefined> {
    await this.db.run('UPDATE trace_dsns SET revoked_at = $2 WHERE dsn_id = $1 AND revoked_at IS NULL', [id, at]);
    return this.dsn(id);
  }
  async dsnUsed(id: string, at: string): Promise<void> {
    await this.db.run('UPDATE trace_dsns SET last_used_at = $2 WHERE dsn_id = $1 AND (last_used_at IS NULL OR last_used_at < $2)', [id, at]);
  }

  async sessionRevoked(sid: string): Promise<boolean> {
    return (await this.db.all('SELECT 1 FROM trace_revoked_sessions WHERE sid = $1', [sid])).length > 0;
  }
  /** Records a logout; revokes whose cookie has expired anyway are dropped. */
  async revokeSession(sid: string, exp: number): Promise<void> {
    await this.db.run('DELETE FROM trace_revoked_sessions WHERE expires_at <= $1', [Math.floor(Date.now() / 1000)]);
    await revokeSession(this.db, sid, exp);
  }

  // -------------------------------------------------------------- runs

  async run(id: string): Promise<RunEntry | undefined> {
    const r = (await this.db.all<Row>('SELECT * FROM trace_runs WHERE run_id = $1', [id]))[0];
    return r && run(r);
  }
  /** The run as stored: `e` when it was new, else the row another call made first. */
  async claimRun(e: RunEntry): Promise<{ entry: RunEntry; created: boolean }> {
    if ((await insertRun(this.db, e)) === 1) return { entry: e, created: true };
    return { entry: (await this.run(e.run_id))!, created: false };
  }
  /** The run's fields a manifest or trace document sets (group-committed). */
  async saveRun(e: RunEntry): Promise<void> {
    await this.db.batch(
      'UPDATE trace_runs SET updated_at = CASE WHEN updated_at < $2 THEN $2 ELSE updated_at END, status = $3, client_name = $4, debug_session_id = $5, step_count = $6, parent_run_id = $7, group_id = $8, session_type = $9 WHERE run_id = $1',
      [e.run_id, e.updated_at, e.status, e.client_name, e.debug_session_id, e.step_count, e.parent_run_id, e.group_id, e.session_type],
    );
  }
  /**
   * A write landed on the run: updated_at to `at` and step_count to at least `stepCount`
   * (group-committed). The touches of one run waiting for the same commit are one
   * statement: a batch of ten steps writes about forty files, each of which touched it.
   */
  async touchRun(runId: string, at: string, stepCount = 0): Promise<void> {
    const pending = this.touches.get(runId);
    if (pending) {
      if (at > pending.at) pending.at = at;
      pending.stepCount = Math.max(pending.stepCount, stepCount);
      await pending.done;
      return;
    }
    const mine = { at, stepCount, done: Promise.resolve(0) };
    this.touches.set(runId, mine);
    mine.done = this.db.batch(TOUCH_RUN, () => {
      if (this.touches.get(runId) === mine) this.touches.delete(runId);
      return [runId, mine.at, mine.stepCount];
    });
    this.inflight.add(mine.done);
    try {
      await mine.done;
    } finally {
      this.inflight.delete(mine.done);
    }
  }
  /** The canonical step_id of a step: `stepId` when this call claimed it first, else the one claimed before (by any replica). */
  async claimStep(runId: string, index: number, stepId: string): Promise<string> {
    if ((await this.db.batch(CLAIM_STEP, [runId, index, stepId])) === 1) return stepId;
    const r = (await this.db.all<Row>('SELECT step_id FROM trace_run_steps WHERE run_id = $1 AND step_index = $2', [runId, index]))[0];
    return r ? String(r.step_id) : stepId;
  }
  /** A tenant's runs newest first (created_at, then run_id), `limit` of them after `after`. */
  async runs(tenantId: string, limit: number, after?: RunsAfter): Promise<RunEntry[]> {
    const rows = after
      ? await this.db.all<Row>('SELECT * FROM trace_runs WHERE tenant_id = $1 AND (created_at < $2 OR (created_at = $2 AND run_id < $3)) ORDER BY created_at DESC, run_id DESC LIMIT $4', [tenantId, after.created_at, after.run_id, limit])
      : await this.db.all<Row>('SELECT * FROM trace_runs WHERE tenant_id = $1 ORDER BY created_at DESC, run_id DESC LIMIT $2', [tenantId, limit]);
    return rows.map(run);
  }

  // -------------------------------------------------------------- commands

  /** Appends a command with the run's next seq (retried when another writer took that seq first). */
  async addCommand(runId: string, c: Omit<Command, 'seq'>): Promise<Command> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.db.tx(async (q) => {
          const last = await q.all<Row>('SELECT MAX(seq) AS seq FROM trace_commands WHERE run_id = $1', [runId]);
          const cmd: Command = { ...c, seq: Number(last[0]?.seq ?? 0) + 1 };
          if ((await insertCommand(q, runId, cmd)) !== 1) throw new Error('command seq taken');
          await q.run('DELETE FROM trace_commands WHERE run_id = $1 AND seq <= $2', [runId, cmd.seq - COMMANDS_KEPT]);
          return cmd;
        });
      } catch (err) {
        if (attempt >= 4) throw err;
      }
    }
  }
  async commandsAfter(runId: string, seq: number): Promise<Command[]> {
    return (await this.db.all<Row>('SELECT * FROM trace_commands WHERE run_id = $1 AND seq > $2 ORDER BY seq', [runId, seq])).map(command);
  }

  // -------------------------------------------------------------- connections, preferences

  async connection(tenantId: string, clientId: string): Promise<Connection | undefined> {
    const r = (await this.db.all<Row>('SELECT * FROM trace_connections WHERE tenant_id = $1 AND client_id = $2', [tenantId, clientId]))[0];
    return r && connection(r);
  }
  async saveConnections(cs: Connection[]): Promise<void> {
    if (cs.length) await this.db.tx(async (q) => { for (const c of cs) await upsertConnection(q, c); });
  }
  async deleteConnection(tenantId: string, clientId: string): Promise<void> {
    await this.db.run('DELETE FROM trace_connections WHERE tenant_id = $1 AND client_id = $2', [tenantId, clientId]);
  }
  /** A tenant's connections seen since `since` (ISO time), latest first; ones idle for a day are dropped. */
  async connections(tenantId: string, since: string): Promise<Connection[]> {
    await this.db.run('DELETE FROM trace_connections WHERE last_seen < $1', [new Date(Date.now() - 24 * 3600_000).toISOString()]);
    return (await this.db.all<Row>('SELECT * FROM trace_connections WHERE tenant_id = $1 AND last_seen >= $2 ORDER BY last_seen DESC', [tenantId, since])).map(connection);
  }

  async addPreference(p: Preference): Promise<void> {
    await insertPreference(this.db, p);
  }
  async preferences(tenantId: string, runId?: string): Promise<Preference[]> {
    const rows = runId
      ? await this.db.all<Row>('SELECT * FROM trace_preferences WHERE tenant_id = $1 AND (run_id_a = $2 OR run_id_b = $2) ORDER BY created_at, preference_id', [tenantId, runId])
      : await this.db.all<Row>('SELECT * FROM trace_preferences WHERE tenant_id = $1 ORDER BY created_at, preference_id', [tenantId]);
    return rows.map(preference);
  }

  async close(): Promise<void> {
    // a touch's file write is answered before its commit (IngestService.write): let those commits land
    while (this.inflight.size) await Promise.allSettled([...this.inflight]);
    return this.db.close();
  }
}
