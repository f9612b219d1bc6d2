// Issue 39: `npm test` (scripts/test.ts) leaves nothing running however it ends.
// Its throwaway PostgreSQL cluster outlived a run ended by a signal the script
// had no handler for (SIGHUP: a closed terminal), and anything ends a run that
// is SIGKILLed. Here a real run of scripts/test.ts on PostgreSQL, with a test
// file that waits (test/fixtures/runner/waits-until-killed.fixture.ts), is killed while
// that file runs: its cluster (every postgres process of it), its data dir and
// its mocha process must all go.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { chmod, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { REPO_ROOT } from '../../shared/build.mjs';
import { cmdline, descendants, processesMentioning, stillPresent } from '../planes/support.ts';
import { sleep } from '../support/gateway.ts';

const FIXTURE = 'test/fixtures/runner/waits-until-killed.fixture.ts';

async function until(what: string, fn: () => boolean, ms: number, out: () => string): Promise<void> {
  const end = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}:\n${out().slice(-3000)}`);
    await sleep(100);
  }
}

describe('scripts/test.ts ends its PostgreSQL cluster and its jobs however it ends', function () {
  this.timeout(120_000);

  for (const sig of ['SIGHUP', 'SIGKILL'] as const) {
    it(`${sig} while a test file runs: no postgres process, data dir or mocha process of the run remains`, async () => {
      // the run's own temp dir: its cluster's dir (and so every postmaster's command line) is under it
      const tmp = await mkdtemp(path.join(tmpdir(), 'rp-ends-'));
      // the server's user (postgres, when this runs as root) reaches its cluster under it
      await chmod(tmp, 0o755);
      const ready = path.join(tmp, 'ready');
      const env: Record<string, string | undefined> = { ...process.env, TMPDIR: tmp, RUNPLANE_FIXTURE_READY: ready };
      // this run's own knobs (its times and CPU files, its store) are not the inner run's
      for (const k of Object.keys(env)) if (k.startsWith('RUNPLANE_TEST_')) delete env[k];
      const run = spawn(process.execPath, ['--import', 'tsx', 'scripts/test.ts', '--store', 'postgres', '--no-checks', FIXTURE], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      run.stdout.on('data', (d: Buffer) => (out += d.toString()));
      run.stderr.on('data', (d: Buffer) => (out += d.toString()));
      const exited = new Promise<void>((r) => run.once('exit', () => r()));
      try {
        await until('the test file to run', () => existsSync(ready) || run.exitCode !== null, 90_000, () => out);
        expect(run.exitCode, out).to.equal(null);
        const mocha = Number(readFileSync(ready, 'utf8'));
        const clusters = readdirSync(tmp).filter((n) => n.startsWith('runplane-pg-'));
        expect(clusters, 'one cluster of the run').to.have.length(1);
        // the postmaster and the cluster's watchdog name its data dir; the postmaster's workers are below it
        const mentioning = processesMentioning(path.join(tmp, clusters[0]!, 'data'));
        const postmasters = mentioning.filter((p) => /\/postgres -D /.test(cmdline(p)));
        expect(postmasters, 'its postmaster').to.have.length(1);
        const server = [...mentioning, ...descendants(postmasters[0]!)];
        expect(server.length, 'the postmaster, its workers and the watchdog').to.be.greaterThan(2);

        run.kill(sig);
        await exited;
        await until('the cluster and the mocha process to go', () => stillPresent([...server, mocha]).length === 0 && !existsSync(path.join(tmp, clusters[0]!)), 30_000, () => `${out}\nleft: ${stillPresent([...server, mocha]).join(' ')}`);
      } finally {
        run.kill('SIGKILL');
      }
    });
  }
});
