// Group commit on the embedded store. The writes asked for within one turn of
// the event loop share one transaction and so one fsync of the write-ahead log;
// each write is its own savepoint, so one that throws is rolled back alone and
// rejects its own caller only. The transaction commits at synchronous NORMAL, and
// the log's fsync runs on the threadpool (wal-sync.ts), not inside the commit on
// the event loop, where it stalled every request and run meanwhile. A caller's
// promise settles after that fsync, so "answered" still means "on disk"; commits
// made while an fsync runs share the next one.
//
// One committer per database (committerOf): were there two, each would open
// its own transaction per turn and the turn would pay two fsyncs again.
import type { Statement } from 'better-sqlite3';
import type { Db } from './db.ts';
import { WalSync } from './wal-sync.ts';

interface Pending {
  write: () => unknown;
  resolve: (r: unknown) => void;
  reject: (err: unknown) => void;
}

/** PRAGMA synchronous = NORMAL (1); FULL is 2 */
const SYNC_NORMAL = 1;

/** The pragmas `unsynced` runs, prepared once per connection (db.pragma prepares on every call: three a commit). */
const pragmas = new WeakMap<Db, { level: Statement; set: Map<number, Statement> }>();

/** Runs `commit` at synchronous NORMAL (the log's frames are written, not synced), whatever the connection's level. */
export function unsynced<T>(db: Db, commit: () => T): T {
  let p = pragmas.get(db);
  if (!p) pragmas.set(db, (p = { level: db.prepare('PRAGMA synchronous').pluck(), set: new Map() }));
  const set = (n: number): void => {
    let st = p.set.get(n);
    if (!st) p.set.set(n, (st = db.prepare(`PRAGMA synchronous = ${n}`)));
    st.run();
  };
  const level = p.level.get() as number;
  if (level <= SYNC_NORMAL) return commit();
  set(SYNC_NORMAL);
  try {
    return commit();
  } finally {
    set(level);
  }
}

type Outcome = { ok: true; value: unknown } | { ok: false; err: unknown };

export class Committer {
  private pending: Pending[] = [];
  private readonly batchTx;
  /** commits made so far (tests count them) */
  commits = 0;
  /** the log's fsync off the event loop; undefined when the database is not in WAL mode (then each commit syncs itself) */
  readonly wal: WalSync | undefined;

  /** `wal`: how the log is synced (tests pass one that waits for them) */
  constructor(
    private readonly db: Db,
    wal?: WalSync,
  ) {
    this.wal = wal ?? (!db.memory && String(db.pragma('journal_mode', { simple: true })).toLowerCase() === 'wal' ? new WalSync(`${db.name}-wal`) : undefined);
    // a transaction function called inside another transaction runs as a savepoint
    const savepoint = db.transaction((write: () => unknown) => write());
    this.batchTx = db.transaction((batch: Pending[]): Outcome[] =>
      batch.map((p) => {
        try {
          return { ok: true, value: savepoint(p.write) };
        } catch (err) {
          return { ok: false, err };
        }
      }),
    );
  }

  /**
   * Runs `write` (synchronous statements of this database) in the next shared
   * commit, after the writes asked for before it; settles once that commit is
   * durable, or with the write's own error (its savepoint rolled back).
   */
  run<R>(write: () => R): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.pending.push({ write, resolve: resolve as (r: unknown) => void, reject });
      if (this.pending.length === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    let outcomes: Outcome[];
    try {
      outcomes = this.wal ? unsynced(this.db, () => this.batchTx.immediate(batch)) : this.batchTx.immediate(batch);
      this.commits++;
    } catch (err) {
      // the commit itself failed (disk full, database closed, busy): nothing of the batch was written
      for (const p of batch) p.reject(err);
      return;
    }
    const answer = (): void =>
      batch.forEach((p, i) => {
        const o = outcomes[i]!;
        if (o.ok) p.resolve(o.value);
        else p.reject(o.err);
      });
    if (!this.wal) return answer();
    // committed but not yet durable: nobody hears of it before the log's fsync (a failed fsync fails them all)
    this.wal.after().then(answer, (err: unknown) => {
      for (const p of batch) p.reject(err);
    });
  }

}

const committers = new WeakMap<Db, Committer>();

/** The committer of `db`: every writer of one connection shares it. */
export function committerOf(db: Db): Committer {
  let c = committers.get(db);
  if (!c) committers.set(db, (c = new Committer(db)));
  return c;
}

/** One kind of write through the database's committer: `run(arg)` joins the turn's shared commit. */
export class GroupCommit<A, R> {
  private readonly committer: Committer;

  constructor(
    db: Db,
    private readonly write: (arg: A) => R,
  ) {
    this.committer = committerOf(db);
  }

  run(arg: A): Promise<R> {
    return this.committer.run(() => this.write(arg));
  }
}
