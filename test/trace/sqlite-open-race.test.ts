// Two replicas on one data dir start together and open the same new SQLite files
// (the gateway's store of record, the trace ingest's metadata). SQLite can answer
// SQLITE_BUSY there without calling its busy handler (a CI run's replica failed to
// start: "database is locked"); shared/sqlite-busy.ts retries those start-up steps.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { whileBusy } from '../../shared/sqlite-busy.ts';
import { builtPath } from '../../shared/build.mjs';

const run = promisify(execFile);
const CHILD = path.join(import.meta.dirname, '../support/open-sqlite-child.ts');

describe('opening one new SQLite file from several processes at once', function () {
  this.timeout(120_000);

  it('retries a busy start-up step, and only a busy one, until its deadline', () => {
    let calls = 0;
    expect(whileBusy(() => (++calls < 3 ? (() => { throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' }); })() : 'opened'))).to.equal('opened');
    expect(calls).to.equal(3);
    calls = 0;
    expect(() => whileBusy(() => { calls++; throw Object.assign(new Error('no such table'), { code: 'SQLITE_ERROR' }); })).to.throw(/no such table/);
    expect(calls, 'another error is not retried').to.equal(1);
    const t0 = Date.now();
    expect(() => whileBusy(() => { throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY_RECOVERY' }); }, 300)).to.throw(/locked/);
    expect(Date.now() - t0).to.be.within(100, 2000);
  });

  for (const which of ['gateway', 'trace-ingest'] as const) {
    it(`${which}: four processes, eight fresh files, every open succeeds`, async () => {
      const dir = await mkdtemp(path.join(tmpdir(), 'runplane-open-race-'));
      for (let round = 0; round < 8; round++) {
        const file = path.join(dir, `db-${round}.sqlite`);
        const outs = await Promise.all(Array.from({ length: 4 }, () => run(process.execPath, [builtPath(CHILD), which, file]).then((r) => r.stdout.trim())));
        expect(outs, `round ${round}`).to.deep.equal(['ok', 'ok', 'ok', 'ok']);
      }
    });
  }
});
