// The store of record's tables on SQLite. better-sqlite3 is synchronous: each
// call below is one short statement on an indexed row, answered in
// microseconds, so wrapping them in promises keeps one interface with the
// networked stores without a thread pool. The writes of a run's path (rows,
// events) go through the database's committer: those of one event-loop turn
// share one commit, so four runs stepping at once pay one fsync, not four.
import { KEY_VIEW, decodeCursor, encodeCursor, headColumns, runText, viewOfRow, type EventTable, type HeadRow, type KeyedStore, type RunKey, type RunPage, type RunQuery, type RunTable, type RunView } from '../tables.ts';
import { SQLITE_OUTBOX_ADD, type OutboxItem } from '../outbox.ts';
import type { Db } from './db.ts';
import { committerOf, type Committer } from './group-commit.ts';

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

/** run_id, tenant_id, status, created_at, body, head */
const UPSERT_RUN =
  'INSERT INTO runs (run_id, tenant_id, status, created_at, body, head) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, body = excluded.body, head = excluded.head';
const PUT_UNLESS_ENDED = `${UPSERT_RUN} WHERE runs.status IN ('queued', 'running')`;
/** status, body, head, run_id, lease key, owner, now */
const PUT_IF_LEASED =
  "UPDATE runs SET status = ?, body = ?, head = ? WHERE run_id = ? AND status IN ('queued', 'running') AND EXISTS (SELECT 1 FROM kv WHERE namespace = '__atomic' AND key = ? AND value = ? AND expires_at > ?)";

/** The run is unfinished and its lease is the owner's (PUT_IF_LEASED's condition, without the write). */
const LEASED =
  "SELECT 1 AS one FROM runs WHERE run_id = ? AND status IN ('queued', 'running') AND EXISTS (SELECT 1 FROM kv WHERE namespace = '__atomic' AND key = ? AND value = ? AND expires_at > ?)";

export class SqliteRunTable<T extends RunKey, V extends RunKey = RunKey> implements RunTable<T, V> {
  private readonly q;
  private readonly committer: Committer;

  constructor(
    db: Db,
    private readonly runView: RunView<T, V> = KEY_VIEW as unknown as RunView<T, V>,
  ) {
    this.committer = committerOf(db);
    const cols = headColumns(runView);
    const order = 'ORDER BY created_at DESC, run_id DESC LIMIT ?';
    this.q = {
      get: db.prepare<[string], { body: string }>('SELECT body FROM runs WHERE run_id = ?'),
      view: db.prepare<[string], HeadRow>(`SELECT ${cols} FROM runs WHERE run_id = ?`),
      put: db.prepare(UPSERT_RUN),
      putUnlessEnded: db.prepare(PUT_UNLESS_ENDED),
      putIfLeased: db.prepare(PUT_IF_LEASED),
      first: db.prepare<[string, number], HeadRow>(`SELECT ${cols} FROM runs WHERE tenant_id = ? ${order}`),
      firstByStatus: db.prepare<[string, string, number], HeadRow>(`SELECT ${cols} FROM runs WHERE tenant_id = ? AND status = ? ${order}`),
      after: db.prepare<[string, string, string, string, number], HeadRow>(
        `SELECT ${cols} FROM runs WHERE tenant_id = ? AND (created_at < ? OR (created_at = ? AND run_id < ?)) ${order}`,
      ),
      afterByStatus: db.prepare<[string, string, string, string, string, number], HeadRow>(
        `SELECT ${cols} FROM runs WHERE tenant_id = ? AND status = ? AND (created_at < ? OR (created_at = ? AND run_id < ?)) ${order}`,
      ),
      unfinished: db.prepare<[], { body: string }>("SELECT body FROM runs WHERE status IN ('queued', 'running') ORDER BY created_at"),
    };
  }

  async get(runId: string): Promise<T | undefined> {
    const row = this.q.get.get(runId);
    return row ? (JSON.parse(row.body) as T) : undefined;
  }

  /** From the head; the body is read only for a row whose head is missing or stale. */
  async view(runId: string): Promise<V | undefined> {
    const row = this.q.view.get(runId);
    return row && viewOfRow(this.runView, row);
  }

  async put(run: T): Promise<void> {
    const { body, head } = runText(run, this.runView);
    await this.committer.run(() => this.q.put.run(run.run_id, run.tenant_id, run.status, run.created_at, body, head));
  }

  async putUnlessEnded(run: T): Promise<boolean> {
    const { body, head } = runText(run, this.runView);
    return this.committer.run(() => this.q.putUnlessEnded.run(run.run_id, run.tenant_id, run.status, run.created_at, body, head).changes > 0);
  }

  async putIfLeased(run: T, leaseKey: string, owner: string): Promise<boolean> {
    const { body, head } = runText(run, this.runView);
    // the lease is checked against the clock of the commit, not of the call
    return this.committer.run(() => this.q.putIfLeased.run(run.status, body, head, run.run_id, leaseKey, owner, Date.now()).changes > 0);
  }

  async page(tenantId: string, q: RunQuery): Promise<RunPage<V>> {
    const after = q.cursor ? decodeCursor(q.cursor) : undefined;
    const n = q.limit + 1; // one more than asked tells whether a next page exists
    const rows = after
      ? q.status
        ? this.q.afterByStatus.all(tenantId, q.status, after.created_at, after.created_at, after.run_id, n)
        : this.q.after.all(tenantId, after.created_at, after.created_at, after.run_id, n)
      : q.status
        ? this.q.firstByStatus.all(tenantId, q.status, n)
        : this.q.first.all(tenantId, n);
    const items = rows.slice(0, q.limit).map((r) => viewOfRow(this.runView, r));
    return { items, next_cursor: rows.length > q.limit ? encodeCursor(items[items.length - 1]!) : null };
  }

  async unfinished(): Promise<T[]> {
    return this.q.unfinished.all().map((r) => JSON.parse(r.body) as T);
  }
}

/** Per-run event logs: the seq is taken inside the insert's transaction, so appends from any process stay dense and ordered. */
export class SqliteEventTable implements EventTable {
  private readonly appendTx;
  private readonly committer: Committer;
  private readonly q;

  constructor(
    db: Db,
    private readonly maxPerRun: number,
    /** the run view of the database's run table: the rows written here carry its head */
    private readonly runView: RunView = KEY_VIEW,
  ) {
    this.committer = committerOf(db);
    this.q = {
      last: db.prepare<[string], { seq: number | null }>('SELECT MAX(seq) AS seq FROM run_events WHERE run_id = ?'),
      insert: db.prepare('INSERT INTO run_events (run_id, seq, body) VALUES (?, ?, ?)'),
      trim: db.prepare('DELETE FROM run_events WHERE run_id = ? AND seq <= ?'),
      after: db.prepare<[string, number], { body: string }>('SELECT body FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq'),
      putRun: db.prepare(UPSERT_RUN),
      putIfLeased: db.prepare(PUT_IF_LEASED),
      putUnlessEnded: db.prepare(PUT_UNLESS_ENDED),
      outboxAdd: db.prepare(SQLITE_OUTBOX_ADD),
      leased: db.prepare<[string, string, string, number], { one: number }>(LEASED),
    };
    this.appendTx = db.transaction((runId: string, event: Record<string, unknown>) => {
      const seq = (this.q.last.get(runId)?.seq ?? 0) + 1;
      const stored = { ...event, seq };
      this.q.insert.run(runId, seq, JSON.stringify(stored));
      // trimmed in steps of 100, not on every append past the cap
      if (seq > this.maxPerRun && seq % 100 === 0) this.q.trim.run(runId, seq - this.maxPerRun);
      return stored;
    });
  }

  async append<E extends Record<string, unknown>>(runId: string, event: E): Promise<E & { seq: number }> {
    return this.committer.run(() => this.appendTx(runId, event) as E & { seq: number });
  }

  async appendWithRun<E extends Record<string, unknown>>(run: RunKey, event: E): Promise<E & { seq: number }> {
    const { body, head } = runText(run, this.runView);
    return this.committer.run(() => {
      this.q.putRun.run(run.run_id, run.tenant_id, run.status, run.created_at, body, head);
      return this.appendTx(run.run_id, event) as E & { seq: number };
    });
  }

  async appendIfLeased<E extends Record<string, unknown>>(run: RunKey, leaseKey: string, owner: string, event: E): Promise<(E & { seq: number }) | null> {
    const { body, head } = runText(run, this.runView);
    return this.committer.run(() => {
      if (this.q.putIfLeased.run(run.status, body, head, run.run_id, leaseKey, owner, Date.now()).changes === 0) return null;
      return this.appendTx(run.run_id, event) as E & { seq: number };
    });
  }

  async appendIfUnended<E extends Record<string, unknown>>(run: RunKey, event: E, outbox?: OutboxItem): Promise<(E & { seq: number }) | null> {
    const { body, head } = runText(run, this.runView);
    return this.committer.run(() => {
      if (this.q.putUnlessEnded.run(run.run_id, run.tenant_id, run.status, run.created_at, body, head).changes === 0) return null;
      if (outbox) this.q.outboxAdd.run(outbox);
      return this.appendTx(run.run_id, event) as E & { seq: number };
    });
  }

  async appendWhileLeased<E extends Record<string, unknown>>(runId: string, leaseKey: string, owner: string, event: E): Promise<(E & { seq: number }) | null> {
    // the check and the append in one transaction of the one writer: nothing ends the run or moves the lease between them
    return this.committer.run(() => (this.q.leased.get(runId, leaseKey, owner, Date.now()) ? (this.appendTx(runId, event) as E & { seq: number }) : null));
  }

  async after<E extends Record<string, unknown>>(runId: string, seq: number): Promise<Array<E & { seq: number }>> {
    return this.q.after.all(runId, seq).map((r) => JSON.parse(r.body) as E & { seq: number });
  }
}
