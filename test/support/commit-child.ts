// A child process for test/gateway/wal-sync: appends run events through the
// store's group committer as fast as it can and prints each seq once its append
// is answered, until it is killed.
import { openDb } from '../../gateway/state/sqlite/db.ts';
import { SqliteEventTable } from '../../gateway/state/sqlite/tables.ts';

const events = new SqliteEventTable(openDb(process.argv[2]!), 100_000);
let n = 0;
for (;;) {
  // several appends per turn, so commits share fsyncs as on a busy gateway
  const batch = Array.from({ length: 4 }, () => events.append('run-kill', { type: 'tick', n: n++ }));
  for (const e of await Promise.all(batch)) process.stdout.write(`${e.seq}\n`);
}
