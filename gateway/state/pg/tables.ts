// The store of record's tables on PostgreSQL: the same behaviour as the SQLite
// tables, shared by every replica.
import type { Outbox, OutboxItem } from '../outbox.ts';
import { KEY_VIEW, decodeCursor, encodeCursor, headColumns, runText, viewOfRow, type EventTable, type HeadRow, type KeyedStore, type RunKey, type RunPage, type RunQuery, type RunTable, type RunView } from '../tables.ts';
import type { Pool } from './db.ts';

/** The database server's clock in milliseconds: every replica compares expiries against one clock. */
export const NOW_MS = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

export class PgKeyedStore<T> implements KeyedStore<T> {
  constructor(
    private readonly pool: Pool,
    private readonly namespace: string,
  ) {}

  async get(key: string): Promise<T | undefined> {
    const { rows } = await this.pool.query<{ value: string }>('SELECT value FROM kv WHERE namespace = $1 AND key = $2 AND expires_at IS NULL', [this.namespace, key]);
    return rows[0] ? (JSON.parse(rows[0].value) as T) : undefined;
  }

  async set(key: string, value: T): Promise<void> {
    await this.pool.query(
      'INSERT INTO kv (namespace, key, value, expires_at) VALUES ($1, $2, $3, NULL) ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, expires_at = NULL',
      [this.namespace, key, JSON.stringify(value)],
    );
  }

  async delete(key: string): Promise<boolean> {
    return ((await this.pool.query('DELETE FROM kv WHERE namespace = $1 AND key = $2', [this.namespace, key])).rowCount ?? 0) > 0;
  }

  async keys(): Promise<string[]> {
    const { rows } = await this.pool.query<{ key: string }>('SELECT key FROM kv WHERE namespace = $1 AND expires_at IS NULL ORDER BY key', [this.namespace]);
    return rows.map((r) => r.key);
  }
}

/** $1 run_id, $2 tenant_id, $3 status, $4 created_at, $5 body, $6 head */
const UPSERT_RUN =
  'INSERT INTO runs (run_id, tenant_id, status, created_at, body, head) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, body = excluded.body, head = excluded.head';
const PUT_UNLESS_ENDED = `${UPSERT_RUN} WHERE runs.status IN ('queued', 'running')`;
/** $1 status, $2 body, $3 head, $4 run_id, $5 lease key, $6 owner */
const PUT_IF_LEASED = `UPDATE runs SET status = $1, body = $2, head = $3 WHERE run_id = $4 AND status IN ('queued', 'running')
  AND EXISTS (SELECT 1 FROM kv WHERE namespace = '__atomic' AND key = $5 AND value = $6 AND expires_at > ${NOW_MS})`;

export class PgRunTable<T extends RunKey, V extends RunKey = RunKey> implements RunTable<T, V> {
  private readonly cols: string;

  constructor(
    private readonly pool: Pool,
    private readonly runView: RunView<T, V> = KEY_VIEW as unknown as RunView<T, V>,
  ) {
    this.cols = headColumns(runView);
  }

  async get(runId: string): Promise<T | undefined> {
    const { rows } = await this.pool.query<{ body: string }>('SELECT body FROM runs WHERE run_id = $1', [runId]);
    return rows[0] ? (JSON.parse(rows[0].body) as T) : undefined;
  }

  /** From the head; the body crosses the wire only for a row whose head is missing or stale. */
  async view(runId: string): Promise<V | undefined> {
    const { rows } = await this.pool.query<HeadRow>(`SELECT ${this.cols} FROM runs WHERE run_id = $1`, [runId]);
    return rows[0] && viewOfRow(this.runView, rows[0]);
  }

  async put(run: T): Promise<void> {
    const { body, head } = runText(run, this.runView);
    await this.pool.query(UPSERT_RUN, [run.run_id, run.tenant_id, run.status, run.created_at, body, head]);
  }

  async putUnlessEnded(run: T): Promise<boolean> {
    const { body, head } = runText(run, this.runView);
    const r = await this.pool.query(PUT_UNLESS_ENDED, [run.run_id, run.tenant_id, run.status, run.created_at, body, head]);
    return (r.rowCount ?? 0) > 0;
  }

  async putIfLeased(run: T, leaseKey: string, owner: string): Promise<boolean> {
    const { body, head } = runText(run, this.runView);
    const r = await this.pool.query(PUT_IF_LEASED, [run.status, body, head, run.run_id, leaseKey, owner]);
    return (r.rowCount ?? 0) > 0;
  }

  async page(tenantId: string, q: RunQuery): Promise<RunPage<V>> {
    const after = q.cursor ? decodeCursor(q.cursor) : undefined;
    const params: unknown[] = [tenantId];
    let where = 'tenant_id = $1';
    if (q.status) {
      params.push(q.status);
      where += ` AND status = $${params.length}`;
    }
    if (after) {
      params.push(after.created_at, after.run_id);
      where += ` AND (created_at, run_id) < ($${params.length - 1}, $${params.length})`;
    }
    params.push(q.limit + 1);
    const { rows } = await this.pool.query<HeadRow>(`SELECT ${this.cols} FROM runs WHERE ${where} ORDER BY created_at DESC, run_id DESC LIMIT $${params.length}`, params);
    const items = rows.slice(0, q.limit).map((r) => viewOfRow(this.runView, r));
    return { items, next_cursor: rows.length > q.limit ? encodeCursor(items[items.length - 1]!) : null };
  }

  async unfinished(): Promise<T[]> {
    const { rows } = await this.pool.query<{ body: string }>("SELECT body FROM runs WHERE status IN ('queued', 'running') ORDER BY created_at");
    return rows.map((r) => JSON.parse(r.body) as T);
  }
}

export class PgEventTable implements EventTable {
  constructor(
    private readonly pool: Pool,
    private readonly maxPerRun: number,
    /** the run view of the database's run table: the rows written here carry its head */
    private readonly runView: RunView = KEY_VIEW,
  ) {}

  async append<E extends Record<string, unknown>>(runId: string, event: E): Promise<E & { seq: number }> {
    // the counter row's lock orders concurrent appenders; one statement, so the seq and the event commit together
    const { rows } = await this.pool.query<{ seq: string }>(
      `WITH s AS (
         INSERT INTO run_event_seq (run_id, seq) VALUES ($1, 1)
         ON CONFLICT (run_id) DO UPDATE SET seq = run_event_seq.seq + 1 RETURNING seq
       )
       INSERT INTO run_events (run_id, seq, body) SELECT $1, s.seq, $2 FROM s RETURNING seq`,
      [runId, JSON.stringify(event)],
    );
    return this.stored(runId, event, rows[0]!.seq);
  }

  async appendWithRun<E extends Record<string, unknown>>(run: RunKey, event: E): Promise<E & { seq: number }> {
    const { body, head } = runText(run, this.runView);
    // one statement, one round trip, one commit: a data-modifying WITH runs once and to completion
    const { rows } = await this.pool.query<{ seq: string }>(
      `WITH r AS (${UPSERT_RUN}),
       s AS (
         INSERT INTO run_event_seq (run_id, seq) VALUES ($1, 1)
         ON CONFLICT (run_id) DO UPDATE SET seq = run_event_seq.seq + 1 RETURNING seq
       )
       INSERT INTO run_events (run_id, seq, body) SELECT $1, s.seq, $7 FROM s RETURNING seq`,
      [run.run_id, run.tenant_id, run.status, run.created_at, body, head, JSON.stringify(event)],
    );
    return this.stored(run.run_id, event, rows[0]!.seq);
  }

  appendIfLeased<E extends Record<string, unknown>>(run: RunKey, leaseKey: string, owner: string, event: E): Promise<(E & { seq: number }) | null> {
    const { body, head } = runText(run, this.runView);
    return this.appendIf(`${PUT_IF_LEASED} RETURNING run_id`, [run.status, body, head, run.run_id, leaseKey, owner], run.run_id, event);
  }

  appendIfUnended<E extends Record<string, unknown>>(run: RunKey, event: E, outbox?: OutboxItem): Promise<(E & { seq: number }) | null> {
    // ON CONFLICT's update locks the row: an ending racing this one waits, then finds the row ended and writes nothing
    const { body, head } = runText(run, this.runView);
    const params: unknown[] = [run.run_id, run.tenant_id, run.status, run.created_at, body, head];
    let also = '';
    if (outbox) {
      params.push(outbox.id, outbox.target, outbox.payload, outbox.attempt, outbox.due_at);
      also = `, o AS (
         INSERT INTO webhook_outbox (id, run_id, target, payload, attempt, due_at, lease_until)
         SELECT $7, run_id, $8, $9, $10::integer, $11::bigint, 0 FROM r ON CONFLICT (id) DO NOTHING
       )`;
    }
    return this.appendIf(`${PUT_UNLESS_ENDED} RETURNING run_id`, params, run.run_id, event, also);
  }

  appendWhileLeased<E extends Record<string, unknown>>(runId: string, leaseKey: string, owner: string, event: E): Promise<(E & { seq: number }) | null> {
    // FOR SHARE holds the run's row, so an end committed meanwhile is waited for and the condition read again
    return this.appendIf(
      `SELECT run_id FROM runs WHERE run_id = $1 AND status IN ('queued', 'running')
       AND EXISTS (SELECT 1 FROM kv WHERE namespace = '__atomic' AND key = $2 AND value = $3 AND expires_at > ${NOW_MS}) FOR SHARE`,
      [runId, leaseKey, owner],
      runId,
      event,
    );
  }

  /**
   * Appends `event` only from the row `guard` (a statement returning run_id) returned, in one
   * statement: the seq counter and the event (and `also`, more writes selecting from r) are
   * written only if the guard held, and all of it commits together. Null: the guard returned
   * nothing, so nothing was written.
   */
  private async appendIf<E extends Record<string, unknown>>(guard: string, params: unknown[], runId: string, event: E, also = ''): Promise<(E & { seq: number }) | null> {
    const n = params.length;
    const { rows } = await this.pool.query<{ seq: string }>(
      `WITH r AS (${guard})${also},
       s AS (
         INSERT INTO run_event_seq (run_id, seq) SELECT run_id, 1 FROM r
         ON CONFLICT (run_id) DO UPDATE SET seq = run_event_seq.seq + 1 RETURNING seq
       )
       INSERT INTO run_events (run_id, seq, body) SELECT $${n + 1}, s.seq, $${n + 2} FROM s RETURNING seq`,
      [...params, runId, JSON.stringify(event)],
    );
    return rows[0] ? this.stored(runId, event, rows[0].seq) : null;
  }

  /** The event as stored; every 100th seq past the cap trims the run's oldest events. */
  private async stored<E extends Record<string, unknown>>(runId: string, event: E, at: string): Promise<E & { seq: number }> {
    const seq = Number(at);
    if (seq > this.maxPerRun && seq % 100 === 0) await this.pool.query('DELETE FROM run_events WHERE run_id = $1 AND seq <= $2', [runId, seq - this.maxPerRun]);
    return { ...event, seq };
  }

  async after<E extends Record<string, unknown>>(runId: string, seq: number): Promise<Array<E & { seq: number }>> {
    const { rows } = await this.pool.query<{ seq: string; body: string }>('SELECT seq, body FROM run_events WHERE run_id = $1 AND seq > $2 ORDER BY seq', [runId, seq]);
    return rows.map((r) => ({ ...(JSON.parse(r.body) as E), seq: Number(r.seq) }));
  }
}

interface OutboxRow {
  id: string;
  run_id: string;
  target: string;
  payload: string;
  attempt: number;
  due_at: string;
}

const item = (r: OutboxRow): OutboxItem => ({ ...r, due_at: Number(r.due_at) });

export class PgOutbox implements Outbox {
  constructor(private readonly pool: Pool) {}

  async add(i: OutboxItem): Promise<void> {
    await this.pool.query(
      'INSERT INTO webhook_outbox (id, run_id, target, payload, attempt, due_at, lease_until) VALUES ($1, $2, $3, $4, $5, $6, 0) ON CONFLICT (id) DO NOTHING',
      [i.id, i.run_id, i.target, i.payload, i.attempt, i.due_at],
    );
  }

  async take(now: number, limit: number, leaseMs: number): Promise<OutboxItem[]> {
    // SKIP LOCKED: two senders taking at once get different items, never the same one twice
    const { rows } = await this.pool.query<OutboxRow>(
      `UPDATE webhook_outbox SET lease_until = $1 + $3::bigint
       WHERE id IN (SELECT id FROM webhook_outbox WHERE due_at <= $1 AND lease_until <= $1 ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED)
       RETURNING id, run_id, target, payload, attempt, due_at`,
      [now, limit, leaseMs],
    );
    return rows.map(item);
  }

  async reschedule(id: string, attempt: number, dueAt: number): Promise<void> {
    await this.pool.query('UPDATE webhook_outbox SET attempt = $1, due_at = $2, lease_until = 0 WHERE id = $3', [attempt, dueAt, id]);
  }

  async remove(id: string): Promise<void> {
    await this.pool.query('DELETE FROM webhook_outbox WHERE id = $1', [id]);
  }

  async nextDue(): Promise<number | undefined> {
    const { rows } = await this.pool.query<{ next: string | null }>('SELECT MIN(GREATEST(due_at, lease_until)) AS next FROM webhook_outbox');
    return rows[0]?.next == null ? undefined : Number(rows[0].next);
  }
}
