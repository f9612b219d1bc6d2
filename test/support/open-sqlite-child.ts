// A child process for test/trace/sqlite-open-race: opens `file` with the gateway's
// store opener or the trace ingest's, then says ok (or the error) on stdout.
import { openDb } from '../../gateway/state/sqlite/db.ts';
import { openSqlite } from '../../plugins/trace-ingest/meta/db.ts';

const [which, file] = process.argv.slice(2);
try {
  if (which === 'gateway') openDb(file!).close();
  else await (openSqlite(file!)).close();
  process.stdout.write('ok\n');
} catch (err) {
  process.stdout.write(`${(err as { code?: string }).code ?? ''} ${(err as Error).message}\n`);
}
