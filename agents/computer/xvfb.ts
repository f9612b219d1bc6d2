// A virtual display on a free number. `-displayfd` lets Xvfb itself pick a free
// display and report it, so two agents never race for the same number; `-noreset`
// keeps the server from resetting when its last client leaves (30 ms -> 3 ms per
// spawned xdotool).
import { spawn, type ChildProcess } from 'node:child_process';
import { stopChild } from '../core/procs.ts';

export interface Display {
  name: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

export async function startXvfb(width: number, height: number, timeoutMs = 10_000): Promise<Display> {
  const child = spawn('Xvfb', ['-displayfd', '3', '-noreset', '-nolisten', 'tcp', '-screen', '0', `${width}x${height}x24`], {
    stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
  });
  let errText = '';
  child.stderr?.on('data', (d: Buffer) => {
    errText = (errText + d.toString()).slice(-2000);
  });
  const fd3 = child.stdio[3] as NodeJS.ReadableStream;
  const name = await new Promise<string>((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`Xvfb did not report a display: ${errText.slice(-300)}`)), timeoutMs);
    fd3.on('data', (d: Buffer) => {
      buf += d.toString();
      const m = /^(\d+)\n/.exec(buf);
      if (m) {
        clearTimeout(timer);
        resolve(`:${m[1]}`);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`Xvfb exited with ${code}: ${errText.slice(-300)}`));
    });
  }).catch(async (err: unknown) => {
    await stopChild(child, 'SIGKILL');
    throw err;
  });
  return { name, child, stop: () => stopChild(child, 'SIGTERM', 2000) };
}
