// A virtual display on a free number. `-displayfd` lets Xvfb itself pick a free
// display and report it, so two agents never race for the same number; `-noreset`
// keeps the server from resetting when its last client leaves (30 ms -> 3 ms per
// spawned xdotool); `-r` turns the server's key autorepeat off: a key's press and
// release are relayed as two inputs (a person's on the takeover page, whose own browser
// repeats a held key), and a release late on a loaded host typed a second character.
// Access needs the display's own MIT-MAGIC-COOKIE (`-auth`): without it Xvfb admits
// every local user, so anything on the host could watch or drive a tenant's browser.
// The cookie file is readable by the agent and the browser user only.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { diesWithAgent, stopChild } from '../core/procs.ts';
import { giveToBrowser, privateTempDir, type BrowserUser } from '../core/browser-user.ts';

export interface Display {
  name: string;
  child: ChildProcess;
  /** The Xauthority file every client of this display (browser, xdotool, ffmpeg) needs. */
  xauthority: string;
  /** DISPLAY and XAUTHORITY for a client of this display. */
  env: Record<string, string>;
  stop(): Promise<void>;
}

/** One Xauthority entry: any host (FamilyWild), any display number, MIT-MAGIC-COOKIE-1. */
export function xauthEntry(cookie: Buffer): Buffer {
  const field = (b: Buffer): Buffer => Buffer.concat([Buffer.from([b.length >> 8, b.length & 0xff]), b]);
  return Buffer.concat([Buffer.from([0xff, 0xff]), field(Buffer.alloc(0)), field(Buffer.alloc(0)), field(Buffer.from('MIT-MAGIC-COOKIE-1')), field(cookie)]);
}

export async function startXvfb(width: number, height: number, user: BrowserUser | undefined, timeoutMs = 10_000): Promise<Display> {
  const dir = privateTempDir('runplane-x-', user);
  const xauthority = join(dir, 'Xauthority');
  writeFileSync(xauthority, xauthEntry(randomBytes(16)), { mode: 0o600 });
  giveToBrowser(xauthority, user);
  const child = spawn(...diesWithAgent('Xvfb', ['-displayfd', '3', '-auth', xauthority, '-noreset', '-r', '-nolisten', 'tcp', '-screen', '0', `${width}x${height}x24`]), {
    stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
  });
  let errText = '';
  child.stderr?.on('data', (d: Buffer) => {
    errText = (errText + d.toString()).slice(-2000);
  });
  const fd3 = child.stdio[3] as NodeJS.ReadableStream;
  const cleanup = async (): Promise<void> => {
    await stopChild(child, 'SIGTERM', 2000);
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  };
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
    await cleanup();
    throw err;
  });
  return { name, child, xauthority, env: { DISPLAY: name, XAUTHORITY: xauthority }, stop: cleanup };
}
