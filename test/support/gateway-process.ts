// Starts the gateway as its own process (`gateway/start.ts`, what `npm start` runs),
// for tests that must see the process itself: that it survives, what it prints,
// which processes it leaves behind.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '../..');

export interface GatewayProcess {
  child: ChildProcess;
  url: string;
  stderr: () => string;
  stdout: () => string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when it has exited */
  stop(graceMs?: number): Promise<void>;
}

export async function startGatewayProcess(env: Record<string, string>): Promise<GatewayProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'gateway/start.ts'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', SERVICE_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start: ${err}`)), 20_000);
    child.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once('exit', (code) => reject(new Error(`gateway exited ${code}: ${err}`)));
  });
  return {
    child,
    url,
    stderr: () => err,
    stdout: () => out,
    async stop(graceMs = 20_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(t);
    },
  };
}
