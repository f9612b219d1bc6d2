// Group commit on the embedded store. A commit with synchronous FULL waits for
// an fsync of the write-ahead log, and better-sqlite3 waits on the event loop:
// one write per fsync, every other request and run stalled meanwhile. Here the
// writes asked for within one turn of the event loop share one transaction and
// so one fsync; each write is its own savepoint, so one that throws is rolled
// back alone and rejects its own caller only. A caller's promise settles after
// the commit, so "answered" still means "on disk".
//
// One committer per database (committerOf): were there two, each would open
// its own transaction per turn and the turn would pay two fsyncs again.
import type { Db } from './db.ts';

interface Pending {
  write: () => unknown;
  resolve: (r: unknown) => void;
  reject: (err: unknown) => void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; err: unknown };

export class Committer {
  private pending: Pending[] = [];
  private readonly batchTx;
  /** commits made so far (tests count them) */
  commits = 0;

  constructor(db: Db) {
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
      outcomes = this.batchTx.immediate(batch);
      this.commits++;
    } catch (err) {
      // the commit itself failed (disk full, database closed, busy): nothing of the batch was written
      for (const p of batch) p.reject(err);
      return;
    }
    batch.forEach((p, i) => {
      const o = outcomes[i]!;
      if (o.ok) p.resolve(o.value);
      else p.reject(o.err);
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
