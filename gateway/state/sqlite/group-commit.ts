// Group commit on the embedded store. A commit with synchronous FULL waits for
// an fsync of the write-ahead log, and better-sqlite3 waits on the event loop:
// one run accepted per fsync, every other request stalled meanwhile. Here the
// writes asked for within one turn of the event loop share one transaction and
// so one fsync; each write is its own savepoint, so one that throws is rolled
// back alone and rejects its own caller only. A caller's promise settles after
// the commit, so "answered" still means "on disk".
import type { Db } from './db.ts';

interface Pending<A, R> {
  arg: A;
  resolve: (r: R) => void;
  reject: (err: unknown) => void;
}

type Outcome<R> = { ok: true; value: R } | { ok: false; err: unknown };

export class GroupCommit<A, R> {
  private pending: Array<Pending<A, R>> = [];
  private readonly batchTx;

  /** `write` runs inside the shared transaction; a transaction function of `db` in it becomes a savepoint. */
  constructor(db: Db, write: (arg: A) => R) {
    const one = db.transaction(write);
    this.batchTx = db.transaction((batch: Array<Pending<A, R>>): Array<Outcome<R>> =>
      batch.map((p) => {
        try {
          return { ok: true, value: one(p.arg) };
        } catch (err) {
          return { ok: false, err };
        }
      }),
    );
  }

  /** Runs `write(arg)` in the next shared commit; settles once that commit is durable (or failed). */
  run(arg: A): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.pending.push({ arg, resolve, reject });
      if (this.pending.length === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    let outcomes: Array<Outcome<R>>;
    try {
      outcomes = this.batchTx.immediate(batch);
    } catch (err) {
      // the commit itself failed (disk full, database closed): nothing of the batch was written
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
