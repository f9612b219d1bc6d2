// A real, throwaway PostgreSQL cluster per test file: initdb in a temporary
// directory, one server on a free loopback port, removed on stop. Debian's
// postgresql package provides the binaries (scripts/ensure-system-deps.sh).
// The server refuses to run as root, so as root it runs as the `postgres` user.
// However its owner ends (stop(), an exit, a signal without a handler, SIGKILL),
// the server goes and its directory is removed: a watchdog outside the owner
// waits for the owner's end (EOF on a pipe only the owner holds), then shuts
// the server down (SIGQUIT: immediate) and removes the directory.
import { execFile, spawn } from 'node:child_process';
import { chown, mkdtemp, readFile, rm } from 'node:fs/promises';
import { readdirSync, rmSync } from 'node:fs';
import type { Socket } from 'node:net';
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

/**
 * A detached shell that blocks reading a pipe from this process: at its EOF (this
 * process gone, however) it stops the server of `data`, if any, and removes `dir`.
 * Detached, so a Ctrl-C to the terminal's process group does not end it first.
 */
function watchdog(dir: string, data: string): { done(): void } {
  const script = [
    'read -r _',
    'pid=$(head -n 1 "$2/postmaster.pid" 2>/dev/null)',
    'if [ -n "$pid" ] && kill -QUIT "$pid" 2>/dev/null; then while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done; fi',
    'rm -rf "$1"',
  ].join('\n');
  const child = spawn('sh', ['-c', script, 'pg-watchdog', dir, data], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
  // neither the pipe nor the child keeps this process alive: its end is what the watchdog waits for
  child.unref();
  const pipe = child.stdin as Socket;
  pipe.unref();
  pipe.on('error', () => undefined);
  return { done: () => pipe.end() };
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
  const guard = watchdog(dir, data);
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
      guard.done();
    },
  };
}
