// Run events: every state change of a run becomes an ordered event (seq from 1
// per run), kept for replay (SSE Last-Event-ID, WebSocket ?after=) and fanned
// out live to watchers and, through onAppend, to the plugins' trace sinks. In
// the store of record by default (its table takes the seq with the insert:
// SQLite embedded, PostgreSQL shared); in memory for tests; on Redis the log is a list per run and fan-out goes
// through pub/sub, so a watcher on one replica sees events published by
// another. One script (state/scripts/run-write-7.lua) takes the seq, stores and
// publishes the event in one step, so two replicas appending to one run (the
// runner and a cancel from an edge) keep the log dense and ordered; when Redis
// is the store of record the same step writes the run's row and checks the
// runner's lease or the run's end, as the SQL tables' transactions do. onAppend
// fires on the replica that appended the event only, so trace sinks see each
// event once however many replicas run.
import { EventEmitter } from 'node:events';
import type { RunEvent } from '../plugins/contract.ts';
import { redisClient, type RedisClient } from '../state/redis-client.ts';
import { EVENTS_CHANNEL, RedisRunWrites, redisKeys, type RunGuard } from '../state/redis-runs.ts';
import type { Outbox, OutboxItem } from '../state/outbox.ts';
import { KEY_VIEW, type EventTable, type RunKey } from '../state/tables.ts';

export type { RunEvent };

export type EventListener = (e: RunEvent) => void;

export interface EventLog {
  append(e: Omit<RunEvent, 'seq' | 'ts'> & { ts?: string }): Promise<RunEvent>;
  /**
   * Stores a run row and appends its event in one step (one commit), when the
   * events live in the store of record beside the runs; absent otherwise (the
   * caller then puts the run and appends).
   */
  appendWithRun?(run: RunKey, e: Omit<RunEvent, 'seq' | 'ts'> & { ts?: string }): Promise<RunEvent>;
  /**
   * A runner's fenced save of its run and an event in one commit, the event only
   * if the save held (EventTable.appendIfLeased); null when neither was written.
   * Absent where the events do not live beside the runs (the caller saves, then appends).
   */
  appendIfLeased?(run: RunKey, leaseKey: string, owner: string, e: Omit<RunEvent, 'seq' | 'ts'> & { ts?: string }): Promise<RunEvent | null>;
  /** A run's ending with its event (and its webhook's outbox item) in one commit, only if the run had not ended (EventTable.appendIfUnended); absent as appendIfLeased. */
  appendIfUnended?(run: RunKey, e: Omit<RunEvent, 'seq' | 'ts'> & { ts?: string }, outbox?: OutboxItem): Promise<RunEvent | null>;
  /** A runner's event without a save, appended only while it holds the lease of an unfinished run (EventTable.appendWhileLeased); absent as appendIfLeased. */
  appendWhileLeased?(leaseKey: string, owner: string, e: Omit<RunEvent, 'seq' | 'ts'> & { ts?: string }): Promise<RunEvent | null>;
  /** events of a run with seq > after, oldest first */
  history(runId: string, after?: number): Promise<RunEvent[]>;
  /** live events of one run ('run:<id>') or one tenant ('tenant:<id>') */
  subscribe(topic: string, listener: EventListener): () => void;
  /** every event this process appends, once, after it is stored (the trace sinks' subscription point) */
  onAppend(listener: EventListener): () => void;
  close(): Promise<void>;
}

/** Most events kept per run; older ones drop off the replay log (live delivery is unaffected). */
export const MAX_EVENTS_PER_RUN = 10_000;

abstract class FanOut {
  protected readonly emitter = new EventEmitter();
  protected readonly appendListeners = new Set<EventListener>();
  constructor() {
    this.emitter.setMaxListeners(0);
  }
  onAppend(listener: EventListener): () => void {
    this.appendListeners.add(listener);
    return () => this.appendListeners.delete(listener);
  }
  protected appended(e: RunEvent): void {
    for (const l of this.appendListeners) {
      try {
        l(e);
      } catch {
        /* a listener's bug is its own */
      }
    }
  }
  subscribe(topic: string, listener: EventListener): () => void {
    this.emitter.on(topic, listener);
    return () => this.emitter.off(topic, listener);
  }
  /** An event another replica (or this one) published. */
  receive(e: RunEvent): void {
    this.deliver(e);
  }

  protected deliver(e: RunEvent): void {
    // a listener that throws must not stop the others or the publisher
    for (const topic of [`run:${e.run_id}`, `tenant:${e.tenant_id}`]) {
      for (const l of this.emitter.listeners(topic) as EventListener[]) {
        try {
          l(e);
        } catch {
          /* watcher bugs are the watcher's */
        }
      }
    }
  }
}

export class MemoryEventLog extends FanOut implements EventLog {
  private readonly logs = new Map<string, RunEvent[]>();
  private readonly seqs = new Map<string, number>();

  async append(input: Omit<RunEvent, 'seq' | 'ts'> & { ts?: string }): Promise<RunEvent> {
    const seq = (this.seqs.get(input.run_id) ?? 0) + 1;
    this.seqs.set(input.run_id, seq);
    const e: RunEvent = { ...input, seq, ts: input.ts ?? new Date().toISOString() };
    const log = this.logs.get(e.run_id) ?? [];
    log.push(e);
    if (log.length > MAX_EVENTS_PER_RUN) log.splice(0, log.length - MAX_EVENTS_PER_RUN);
    this.logs.set(e.run_id, log);
    this.deliver(e);
    this.appended(e);
    return e;
  }

  async history(runId: string, after = 0): Promise<RunEvent[]> {
    return (this.logs.get(runId) ?? []).filter((e) => e.seq > after);
  }

  async close(): Promise<void> {
    this.emitter.removeAllListeners();
    this.appendListeners.clear();
  }
}

/**
 * A publishing and a subscribed connection; `attach` delivers what any replica
 * publishes to the log's watchers. `shared`: the state's command connection,
 * which the log publishes on (and does not close) instead of opening its own.
 */
async function fanOutClients(url: string, shared?: RedisClient) {
  const pub = shared ?? (await redisClient(url));
  const sub = await redisClient(url, { subscriber: true });
  if (!shared) await pub.connect();
  await sub.connect();
  const attach = (log: FanOut) =>
    sub.subscribe(EVENTS_CHANNEL, (message) => {
      try {
        log.receive(JSON.parse(message) as RunEvent);
      } catch {
        /* not ours */
      }
    });
  // the connections the log closes: never the shared one
  const owned = shared ? [sub] : [sub, pub];
  return { pub, attach, owned };
}

export class RedisEventLog extends FanOut implements EventLog {
  private constructor(
    private readonly client: RedisClient,
    private readonly writes: RedisRunWrites,
    private readonly outbox: Outbox | undefined,
    private readonly owned: RedisClient[],
  ) {
    super();
  }

  /**
   * `shared`: the state's command connection; `writes` and `outbox`: the state's, when Redis is the
   * store of record (the guarded appends write its rows); `ttlSeconds` of a log opened on its own.
   */
  static async open(url: string, o: { shared?: RedisClient; writes?: RedisRunWrites; outbox?: Outbox; ttlSeconds?: number } = {}): Promise<RedisEventLog> {
    const { pub, owned, attach } = await fanOutClients(url, o.shared);
    const writes = o.writes ?? new RedisRunWrites(pub, { maxEvents: MAX_EVENTS_PER_RUN, eventTtlSeconds: o.ttlSeconds ?? 7 * 24 * 3600, runView: KEY_VIEW });
    const log = new RedisEventLog(pub, writes, o.outbox, owned);
    await attach(log);
    return log;
  }

  async append(input: Omit<RunEvent, 'seq' | 'ts'> & { ts?: string }): Promise<RunEvent> {
    // seq is taken by the script that stores and publishes the event: one step in Redis, whoever appends
    return (await this.write(input, { kind: 'none' }))!;
  }

  async appendWithRun(run: RunKey, input: Omit<RunEvent, 'seq' | 'ts'> & { ts?: string }): Promise<RunEvent> {
    return (await this.write(input, { kind: 'none' }, run))!;
  }

  appendIfLeased(run: RunKey, leaseKey: string, owner: string, input: Omit<RunEvent, 'seq' | 'ts'> & { ts?: string }): Promise<RunEvent | null> {
    return this.write(input, { kind: 'leased', leaseKey, owner }, run);
  }

  async appendIfUnended(run: RunKey, input: Omit<RunEvent, 'seq' | 'ts'> & { ts?: string }, outbox?: OutboxItem): Promise<RunEvent | null> {
    const e = await this.write(input, { kind: 'unended' }, run);
    // the outbox of this mode is the replica's own (README): queued after the ending the script wrote
    if (e && outbox) await this.outbox?.add(outbox);
    return e;
  }

  appendWhileLeased(leaseKey: string, owner: string, input: Omit<RunEvent, 'seq' | 'ts'> & { ts?: string }): Promise<RunEvent | null> {
    return this.write(input, { kind: 'leased', leaseKey, owner });
  }

  /** The event (and the row, when given) written in one script while `guard` holds; null when it did not. */
  private async write(input: Omit<RunEvent, 'seq' | 'ts'> & { ts?: string }, guard: RunGuard, row?: RunKey): Promise<RunEvent | null> {
    const { run_id, tenant_id, type, data } = input;
    if (row && row.run_id !== run_id) throw new Error(`event of run ${run_id} with the row of run ${row.run_id}`);
    const body = JSON.stringify({ run_id, tenant_id, type, ts: input.ts ?? new Date().toISOString(), data });
    const text = await this.writes.write(run_id, tenant_id, guard, { row, event: body });
    if (text === null) return null;
    const e = JSON.parse(text) as RunEvent;
    this.appended(e);
    return e;
  }

  async history(runId: string, after = 0): Promise<RunEvent[]> {
    const all = await this.client.lRange(redisKeys.events(runId), 0, -1);
    return all.map((t) => JSON.parse(t) as RunEvent).filter((e) => e.seq > after);
  }

  async close(): Promise<void> {
    this.emitter.removeAllListeners();
    this.appendListeners.clear();
    await closeAll(this.owned);
  }
}

/**
 * Events in the store of record (SQLite or PostgreSQL), whose table takes the
 * seq with the insert. Live fan-out within this process, or, with Redis,
 * through pub/sub so a watcher on any replica sees every event.
 */
export class TableEventLog extends FanOut implements EventLog {
  private constructor(
    private readonly table: EventTable,
    private readonly pub?: RedisClient,
    private readonly owned: RedisClient[] = [],
  ) {
    super();
  }

  static async open(table: EventTable, redisUrl?: string, shared?: RedisClient): Promise<TableEventLog> {
    if (!redisUrl) return new TableEventLog(table);
    const { pub, owned, attach } = await fanOutClients(redisUrl, shared);
    const log = new TableEventLog(table, pub, owned);
    await attach(log);
    return log;
  }

  async append(input: Omit<RunEvent, 'seq' | 'ts'> & { ts?: string }): Promise<RunEvent> {
    const { run_id, tenant_id, type, data } = input;
    return this.publish((await this.table.append(run_id, { run_id, tenant_id, type, ts: input.ts ?? new Date().toISOString(), data })) as unknown as RunEvent);
  }

  async appendWithRun(run: RunKey, input: Omit<RunEvent, 'seq' | 'ts'> & { ts?: string }): Promise<RunEvent> {
    const { run_id, tenant_id, type, data } = input;
    if (run_id !== run.run_id) throw new Error(`appendWithRun: event of run ${run_id} with the row of run ${run.run_id}`);
    return this.publish((await this.table.appendWithRun(run, { run_id, tenant_id, type, ts: input.ts ?? new Date().toISOString(), data })) as unknown as RunEvent);
  }

  async appendIfLeased(run: RunKey, leaseKey: string, owner: string, input: Omit<RunEvent, 'seq' | 'ts'> & { ts?: string }): Promise<RunEvent | null> {
    const { run_id, tenant_id, type, data } = input;
    if (run_id !== run.run_id) throw new Error(`appendIfLeased: event of run ${run_id} with the row of run ${run.run_id}`);
    const stored = await this.table.appendIfLeased(run, leaseKey, owner, { run_id, tenant_id, type, ts: input.ts ?? new Date().toISOString(), data });
    return stored ? this.publish(stored as unknown as RunEvent) : null;
  }

  async appendIfUnended(run: RunKey, input: Omit<RunEvent, 'seq' | 'ts'> & { ts?: string }, outbox?: OutboxItem): Promise<RunEvent | null> {
    const { run_id, tenant_id, type, data } = input;
    if (run_id !== run.run_id) throw new Error(`appendIfUnended: event of run ${run_id} with the row of run ${run.run_id}`);
    const stored = await this.table.appendIfUnended(run, { run_id, tenant_id, type, ts: input.ts ?? new Date().toISOString(), data }, outbox);
    return stored ? this.publish(stored as unknown as RunEvent) : null;
  }

  async appendWhileLeased(leaseKey: string, owner: string, input: Omit<RunEvent, 'seq' | 'ts'> & { ts?: string }): Promise<RunEvent | null> {
    const { run_id, tenant_id, type, data } = input;
    const stored = await this.table.appendWhileLeased(run_id, leaseKey, owner, { run_id, tenant_id, type, ts: input.ts ?? new Date().toISOString(), data });
    return stored ? this.publish(stored as unknown as RunEvent) : null;
  }

  /** Fans a stored event out: through Redis when there is Redis, else to this process's watchers. */
  private async publish(e: RunEvent): Promise<RunEvent> {
    let published = false;
    if (this.pub) {
      // stored first: a watcher that misses the message (Redis away) resumes from the store with Last-Event-ID
      published = await this.pub.publish(EVENTS_CHANNEL, JSON.stringify(e)).then(
        () => true,
        () => false,
      );
    }
    if (!published) this.deliver(e);
    this.appended(e);
    return e;
  }

  async history(runId: string, after = 0): Promise<RunEvent[]> {
    return (await this.table.after(runId, after)) as unknown as RunEvent[];
  }

  async close(): Promise<void> {
    this.emitter.removeAllListeners();
    this.appendListeners.clear();
    await closeAll(this.owned);
  }
}

async function closeAll(clients: RedisClient[]): Promise<void> {
  for (const c of clients) if (c.isOpen) await c.close().catch(() => {});
}

/**
 * Events live in the store of record's table when there is one; else in Redis
 * (shared) or memory (tests). `shared`: the state's Redis command connection;
 * `redisStore`: the state's guarded writes and outbox when Redis is the store of record.
 */
export async function openEventLog(redisUrl?: string, table?: EventTable, shared?: RedisClient, redisStore?: { writes: RedisRunWrites; outbox: Outbox }): Promise<EventLog> {
  if (table) return TableEventLog.open(table, redisUrl, shared);
  return redisUrl ? RedisEventLog.open(redisUrl, { shared, ...redisStore }) : new MemoryEventLog();
}
