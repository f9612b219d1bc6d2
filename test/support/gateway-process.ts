// Starts the gateway as its own process (`gateway/start.ts`, what `npm start` runs),
// for tests that must see the process itself: that it survives, what it prints,
// which processes it leaves behind.
import { spawn, type ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { storeEnv } from './store.ts';
import { builtPath } from '../../shared/build.mjs';

const root = path.resolve(import.meta.dirname, '../..');

export interface GatewayProcess {
  child: ChildProcess;
  url: string;
  port: number;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr: () => string;
  stdout: () => string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when it has exited */
  stop(graceMs?: number): Promise<void>;
}

/**
 * A gateway process; like the in-process ones (gateway.ts), without a spare agent per
 * plane unless `env` asks for it (SERVICE_PLANE_SPARE). `via: 'npm'` runs `npm start` as
 * an operator (or systemd, or a container runtime) does: the real npm, its prestart and
 * the shell it uses.
 */
export async function startGatewayProcess(env: Record<string, string>, o: { via?: 'node' | 'npm' } = {}): Promise<GatewayProcess> {
  const [cmd, args] = o.via === 'npm' ? ['npm', ['start']] : [process.execPath, [builtPath('gateway/start.ts')]];
  const child = spawn(cmd, args, {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', TMPDIR: tmpdir(), SERVICE_PORT: '0', SERVICE_PLANE_SPARE: process.env.RUNPLANE_TEST_PLANE_SPARE ?? '0', ...(env.SERVICE_DATA_DIR ? await storeEnv(env.SERVICE_DATA_DIR, env) : {}), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const url = await new Promise<string>((resolve, reject) => {
    // generous: a start on a 2-core host beside a loaded suite took over 20 s; one that never listens is killed
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`gateway did not start: ${err}`));
    }, 60_000);
    child.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    void exited.then(({ code }) => reject(new Error(`gateway exited ${code}: ${err}`)));
  });
  return {
    child,
    url,
    port: Number(new URL(url).port),
    exited,
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
