// The write-ahead log's fsync, off the event loop. With `synchronous = FULL`
// SQLite fsyncs the log inside each commit, and better-sqlite3 runs the commit on
// the event loop: every run and request of the gateway waited for the disk (a
// run's ~47 commits blocked it 110 ms alone, 380 ms a run at four at once, p99 27
// ms a commit). The group committer commits at NORMAL instead (the frames are
// written to the log, not synced) and asks this for an fdatasync of the log on
// libuv's threadpool before it answers anyone: what a caller is told is committed
// is on disk, as before. A process that dies between the two loses nothing (the
// frames are in the page cache); a power cut then loses only commits nobody was
// told of. The log is opened for each fsync (two threadpool hops beside the fsync):
// nothing to close with the database, and SQLite takes no lock on the log file (its
// locks are on the database and -shm files), so our close releases none of them.
import { open, type FileHandle } from 'node:fs/promises';

export class WalSync {
  /** the fsync under way */
  private running: Promise<void> | undefined;
  /** the fsync that starts when the running one ends: it covers every commit made meanwhile */
  private queued: Promise<void> | undefined;
  /** fsyncs started so far (tests count them) */
  syncs = 0;

  constructor(
    private readonly walFile: string,
    private readonly datasync: (h: FileHandle) => Promise<void> = (h) => h.datasync(),
  ) {}

  /** Resolves once an fsync of the log that began after this call has ended (rejects with its error). */
  after(): Promise<void> {
    if (this.queued) return this.queued;
    if (!this.running) return this.start();
    const queued = this.running
      .catch(() => undefined)
      .then(() => {
        this.queued = undefined;
        return this.start();
      });
    this.queued = queued;
    return queued;
  }

  private start(): Promise<void> {
    this.syncs++;
    const run: Promise<void> = this.sync().finally(() => {
      if (this.running === run) this.running = undefined;
    });
    this.running = run;
    return run;
  }

  private async sync(): Promise<void> {
    // the log exists once the database is in WAL mode and has been written (migrations)
    const h = await open(this.walFile, 'r+');
    try {
      await this.datasync(h);
    } finally {
      await h.close();
    }
  }
}
