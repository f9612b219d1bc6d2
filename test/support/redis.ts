// A real redis-server per test file, on a free loopback port, keeping nothing on disk.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { once } from 'node:events';

export interface RedisHandle {
  url: string;
  port: number;
  pid: number;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  const srv = createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const addr = srv.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/** A redis-server on `port` (a free one when not given): a test restarts Redis by starting it again on the same port. */
export async function startRedis(port?: number): Promise<RedisHandle> {
  port ??= await freePort();
  // --pdeathsig: the server goes when the test process goes, however it ends (a SIGTERM or SIGKILL of mocha runs no exit handler)
  const child: ChildProcess = spawn(
    'setpriv',
    ['--pdeathsig', 'KILL', '--', 'redis-server', '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--logfile', ''],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server did not start: ${out}`)), 10_000);
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('Ready to accept connections')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited with ${code}: ${out}`));
    });
  });
  child.stdout?.resume();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    pid: child.pid!,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}
