// The webhook outbox: deliveries waiting for their next attempt, kept with the
// store of record so a restart loses none. A sender takes due items under a
// lease, so replicas sharing the store attempt each scheduled try once (a
// sender that dies mid-attempt leaves its lease to expire, and the try is made
// again: at least once, as Standard Webhooks receivers expect).
import type { Db } from './sqlite/db.ts';

export interface OutboxItem {
  /** the webhook-id, stable across retries */
  id: string;
  run_id: string;
  /** JSON of the delivery target (URL and secret name) */
  target: string;
  /** the body, exactly as signed and sent */
  payload: string;
  /** the attempt this item is due for, from 1 */
  attempt: number;
  due_at: number;
}

export interface Outbox {
  add(item: OutboxItem): Promise<void>;
  /** Takes up to `limit` items due by `now`, each leased for `leaseMs` to this caller. */
  take(now: number, limit: number, leaseMs: number): Promise<OutboxItem[]>;
  /** The item's next attempt, due at `dueAt` (releases its lease). */
  reschedule(id: string, attempt: number, dueAt: number): Promise<void>;
  remove(id: string): Promise<void>;
  /** When the next item falls due, or undefined when none waits. */
  nextDue(): Promise<number | undefined>;
}

export class MemoryOutbox implements Outbox {
  private readonly items = new Map<string, OutboxItem & { lease_until: number }>();

  async add(item: OutboxItem): Promise<void> {
    this.items.set(item.id, { ...item, lease_until: 0 });
  }

  async take(now: number, limit: number, leaseMs: number): Promise<OutboxItem[]> {
    const due = [...this.items.values()].filter((i) => i.due_at <= now && i.lease_until <= now).sort((a, b) => a.due_at - b.due_at);
    return due.slice(0, limit).map((i) => {
      i.lease_until = now + leaseMs;
      const { lease_until: _l, ...item } = i;
      return item;
    });
  }

  async reschedule(id: string, attempt: number, dueAt: number): Promise<void> {
    const i = this.items.get(id);
    if (i) Object.assign(i, { attempt, due_at: dueAt, lease_until: 0 });
  }

  async remove(id: string): Promise<void> {
    this.items.delete(id);
  }

  async nextDue(): Promise<number | undefined> {
    let next: number | undefined;
    for (const i of this.items.values()) next = Math.min(next ?? Infinity, Math.max(i.due_at, i.lease_until));
    return next;
  }
}

/** An item's insert on SQLite (named parameters: an OutboxItem); also run inside a run's ending. */
export const SQLITE_OUTBOX_ADD =
  'INSERT INTO webhook_outbox (id, run_id, target, payload, attempt, due_at, lease_until) VALUES (@id, @run_id, @target, @payload, @attempt, @due_at, 0) ON CONFLICT (id) DO NOTHING';

export class SqliteOutbox implements Outbox {
  private readonly q;
  private readonly takeTx;

  constructor(db: Db) {
    this.q = {
      add: db.prepare(SQLITE_OUTBOX_ADD),
      due: db.prepare<[number, number, number], OutboxItem>(
        'SELECT id, run_id, target, payload, attempt, due_at FROM webhook_outbox WHERE due_at <= ? AND lease_until <= ? ORDER BY due_at LIMIT ?',
      ),
      lease: db.prepare('UPDATE webhook_outbox SET lease_until = ? WHERE id = ?'),
      reschedule: db.prepare('UPDATE webhook_outbox SET attempt = ?, due_at = ?, lease_until = 0 WHERE id = ?'),
      remove: db.prepare('DELETE FROM webhook_outbox WHERE id = ?'),
      next: db.prepare<[], { next: number | null }>('SELECT MIN(MAX(due_at, lease_until)) AS next FROM webhook_outbox'),
    };
    this.takeTx = db.transaction((now: number, limit: number, leaseMs: number) => {
      const items = this.q.due.all(now, now, limit);
      for (const i of items) this.q.lease.run(now + leaseMs, i.id);
      return items;
    });
  }

  async add(item: OutboxItem): Promise<void> {
    this.q.add.run(item);
  }

  async take(now: number, limit: number, leaseMs: number): Promise<OutboxItem[]> {
    return this.takeTx.immediate(now, limit, leaseMs);
  }

  async reschedule(id: string, attempt: number, dueAt: number): Promise<void> {
    this.q.reschedule.run(attempt, dueAt, id);
  }

  async remove(id: string): Promise<void> {
    this.q.remove.run(id);
  }

  async nextDue(): Promise<number | undefined> {
    return this.q.next.get()?.next ?? undefined;
  }
}
