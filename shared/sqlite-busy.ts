// Two processes opening one new SQLite file at once (two replicas on a shared data
// dir, both starting) can meet SQLITE_BUSY where SQLite does not call the busy
// handler, e.g. while one switches the file to WAL: `timeout` does not help there,
// and start-up failed with "database is locked" (1 in 15 concurrent opens here).
// Start-up steps are retried instead, a short blocking sleep apart (nothing else
// runs yet on this process's event loop).

const sleepSync = (ms: number): void => {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
};

/** Runs `step` (synchronous SQLite work at open), again while it fails with SQLITE_BUSY, for up to `withinMs`. */
export function whileBusy<T>(step: () => T, withinMs = 15_000): T {
  const deadline = Date.now() + withinMs;
  for (let wait = 10; ; wait = Math.min(wait * 2, 200)) {
    try {
      return step();
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (typeof code !== 'string' || !code.startsWith('SQLITE_BUSY') || Date.now() + wait > deadline) throw err;
      sleepSync(wait);
    }
  }
}
