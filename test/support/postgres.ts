// A real, throwaway PostgreSQL cluster per test file: initdb in a temporary
// directory, one server on a free loopback port, removed on stop. Debian's
// postgresql package provides the binaries (scripts/ensure-system-deps.sh).
// The server refuses to run as root, so as root it runs as the `postgres` user.
import { execFile, spawn } from 'node:child_process';
import { chown, mkdtemp, readFile, rm } from 'node:fs/promises';
import { readdirSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './redis.ts';

const run = promisify(execFile);

export interface PgHandle {
  url: string;
  port: number;
  /** stops the server fast (as a crash would: no checkpoint), keeping its data */
  kill(): Promise<void>;
  /** starts it again on the same port and data */
  start(): Promise<void>;
  /** stops it and removes its data */
  stop(): Promise<void>;
}

function binDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = readdirSync(root)
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a));
  if (!versions.length) throw new Error('no PostgreSQL under /usr/lib/postgresql: run scripts/ensure-system-deps.sh');
  return path.join(root, versions[0]!, 'bin');
}

export async function startPostgres(): Promise<PgHandle> {
  const bin = binDir();
  const dir = await mkdtemp(path.join(tmpdir(), 'runplane-pg-'));
  const data = path.join(dir, 'data');
  const asRoot = userInfo().uid === 0;
  let ids: { uid: number; gid: number } | undefined;
  if (asRoot) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: g } = await run('id', ['-g', 'postgres']);
    ids = { uid: Number(stdout.trim()), gid: Number(g.trim()) };
    await chown(dir, ids.uid, ids.gid);
  }
  const as = (cmd: string, args: string[]) =>
    new Promise<void>((resolve, reject) => {
      const child = spawn(path.join(bin, cmd), args, { ...(ids ?? {}), cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      child.once('error', reject);
      child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} exited ${code}: ${out.slice(-2000)}`))));
    });
  await as('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync', '--no-instructions']);
  const port = await freePort();
  const start = () =>
    as('pg_ctl', ['-D', data, '-l', path.join(dir, 'server.log'), '-w', '-t', '30', '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`, 'start']);
  await start();
  // The postmaster's pid: whatever happens to stop() (never called because the process exits
  // first, or pg_ctl failing), the server does not outlive the test process.
  const pidOf = async () => Number((await readFile(path.join(data, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n')[0]) || 0;
  let pid = await pidOf();
  const reap = () => {
    if (pid) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
  };
  const reapAtExit = () => {
    reap();
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', reapAtExit);
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    async start() {
      await start();
      pid = await pidOf();
    },
    kill: () => as('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']),
    async stop() {
      await as('pg_ctl', ['-D', data, '-m', 'immediate', '-w', '-t', '10', 'stop']).catch(() => undefined);
      reap();
      pid = 0;
      process.off('exit', reapAtExit);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
