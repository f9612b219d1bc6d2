// The store of record's tables on SQLite. better-sqlite3 is synchronous: each
// call below is one short transaction on an indexed row, answered in
// microseconds, so wrapping them in promises keeps one interface with the
// networked stores without a thread pool.
import { decodeCursor, encodeCursor, type EventTable, type KeyedStore, type RunKey, type RunPage, type RunQuery, type RunTable } from '../tables.ts';
import type { Db } from './db.ts';
import { GroupCommit } from './group-commit.ts';

export class SqliteKeyedStore<T> implements KeyedStore<T> {
  private readonly q;

  constructor(
    db: Db,
    private readonly namespace: string,
  ) {
    this.q = {
      get: db.prepare<[string, string], { value: string }>('SELECT value FROM kv WHERE namespace = ? AND key = ? AND expires_at IS NULL'),
      set: db.prepare('INSERT INTO kv (namespace, key, value, expires_at) VALUES (?, ?, ?, NULL) ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, expires_at = NULL'),
      del: db.prepare('DELETE FROM kv WHERE namespace = ? AND key = ?'),
      keys: db.prepare<[string], { key: string }>('SELECT key FROM kv WHERE namespace = ? AND expires_at IS NULL ORDER BY key'),
    };
  }

  async get(key: string): Promise<T | undefined> {
    const row = this.q.get.get(this.namespace, key);
    return row ? (JSON.parse(row.value) as T) : undefined;
  }

  async set(key: string, value: T): Promise<void> {
    this.q.set.run(this.namespace, key, JSON.stringify(value));
  }

  async delete(key: string): Promise<boolean> {
    return this.q.del.run(this.namespace, key).changes > 0;
  }

  async keys(): Promise<string[]> {
    return this.q.keys.all(this.namespace).map((r) => r.key);
  }
}

const UPSERT_RUN = 'INSERT INTO runs (run_id, tenant_id, status, created_at, body) VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, body = excluded.body';

export class SqliteRunTable<T extends RunKey> implements RunTable<T> {
  private readonly q;

  constructor(db: Db) {
    this.q = {
      get: db.prepare<[string], { body: string }>('SELECT body FROM runs WHERE run_id = ?'),
      put: db.prepare(UPSERT_RUN),
      putUnlessEnded: db.prepare(
        "INSERT INTO runs (run_id, tenant_id, status, created_at, body) VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, body = excluded.body WHERE runs.status IN ('queued', 'running')",
      ),
      putIfLeased: db.prepare(
        "UPDATE runs SET status = ?, body = ? WHERE run_id = ? AND status IN ('queued', 'running') AND EXISTS (SELECT 1 FROM kv WHERE namespace = '__atomic' AND key = ? AND value = ? AND expires_at > ?)",
      ),
      first: db.prepare<[string, number], { body: string }>('SELECT body FROM runs WHERE tenant_id = ? ORDER BY created_at DESC, run_id DESC LIMIT ?'),
      firstByStatus: db.prepare<[string, string, number], { body: string }>(
        'SELECT body FROM runs WHERE tenant_id = ? AND status = ? ORDER BY created_at DESC, run_id DESC LIMIT ?',
      ),
      after: db.prepare<[string, string, string, string, number], { body: string }>(
        'SELECT body FROM runs WHERE tenant_id = ? AND (created_at < ? OR (created_at = ? AND run_id < ?)) ORDER BY created_at DESC, run_id DESC LIMIT ?',
      ),
      afterByStatus: db.prepare<[string, string, string, string, string, number], { body: string }>(
        'SELECT body FROM runs WHERE tenant_id = ? AND status = ? AND (created_at < ? OR (created_at = ? AND run_id < ?)) ORDER BY created_at DESC, run_id DESC LIMIT ?',
      ),
      unfinished: db.prepare<[], { body: string }>("SELECT body FROM runs WHERE status IN ('queued', 'running') ORDER BY created_at"),
    };
  }

  async get(runId: string): Promise<T | undefined> {
    const row = this.q.get.get(runId);
    return row ? (JSON.parse(row.body) as T) : undefined;
  }

  async put(run: T): Promise<void> {
    this.q.put.run(run.run_id, run.tenant_id, run.status, run.created_at, JSON.stringify(run));
  }

  async putUnlessEnded(run: T): Promise<boolean> {
    return this.q.putUnlessEnded.run(run.run_id, run.tenant_id, run.status, run.created_at, JSON.stringify(run)).changes > 0;
  }

  async putIfLeased(run: T, leaseKey: string, owner: string): Promise<boolean> {
    return this.q.putIfLeased.run(run.status, JSON.stringify(run), run.run_id, leaseKey, owner, Date.now()).changes > 0;
  }

  async page(tenantId: string, q: RunQuery): Promise<RunPage<T>> {
    const after = q.cursor ? decodeCursor(q.cursor) : undefined;
    const n = q.limit + 1; // one more than asked tells whether a next page exists
    const rows = after
      ? q.status
        ? this.q.afterByStatus.all(tenantId, q.status, after.created_at, after.created_at, after.run_id, n)
        : this.q.after.all(tenantId, after.created_at, after.created_at, after.run_id, n)
      : q.status
        ? this.q.firstByStatus.all(tenantId, q.status, n)
        : this.q.first.all(tenantId, n);
    const items = rows.slice(0, q.limit).map((r) => JSON.parse(r.body) as T);
    return { items, next_cursor: rows.length > q.limit ? encodeCursor(items[items.length - 1]) : null };
  }

  async unfinished(): Promise<T[]> {
    return this.q.unfinished.all().map((r) => JSON.parse(r.body) as T);
  }
}

/** Per-run event logs: the seq is taken inside the insert's transaction, so appends from any process stay dense and ordered. */
export class SqliteEventTable implements EventTable {
  private readonly appendTx;
  private readonly appendWithRunTx;
  private readonly q;

  constructor(
    db: Db,
    private readonly maxPerRun: number,
  ) {
    this.q = {
      last: db.prepare<[string], { seq: number | null }>('SELECT MAX(seq) AS seq FROM run_events WHERE run_id = ?'),
      insert: db.prepare('INSERT INTO run_events (run_id, seq, body) VALUES (?, ?, ?)'),
      trim: db.prepare('DELETE FROM run_events WHERE run_id = ? AND seq <= ?'),
      after: db.prepare<[string, number], { body: string }>('SELECT body FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq'),
      putRun: db.prepare(UPSERT_RUN),
    };
    this.appendTx = db.transaction((runId: string, event: Record<string, unknown>) => {
      const seq = (this.q.last.get(runId)?.seq ?? 0) + 1;
      const stored = { ...event, seq };
      this.q.insert.run(runId, seq, JSON.stringify(stored));
      // trimmed in steps of 100, not on every append past the cap
      if (seq > this.maxPerRun && seq % 100 === 0) this.q.trim.run(runId, seq - this.maxPerRun);
      return stored;
    });
    // the row and its event in one savepoint, committed with the other acceptances of this event-loop turn (one fsync)
    this.appendWithRunTx = new GroupCommit(db, ({ run, event }: { run: RunKey; event: Record<string, unknown> }) => {
      this.q.putRun.run(run.run_id, run.tenant_id, run.status, run.created_at, JSON.stringify(run));
      return this.appendTx(run.run_id, event);
    });
  }

  async append<E extends Record<string, unknown>>(runId: string, event: E): Promise<E & { seq: number }> {
    return this.appendTx.immediate(runId, event) as E & { seq: number };
  }

  async appendWithRun<E extends Record<string, unknown>>(run: RunKey, event: E): Promise<E & { seq: number }> {
    return (await this.appendWithRunTx.run({ run, event })) as E & { seq: number };
  }

  async after<E extends Record<string, unknown>>(runId: string, seq: number): Promise<Array<E & { seq: number }>> {
    return this.q.after.all(runId, seq).map((r) => JSON.parse(r.body) as E & { seq: number });
  }
}
