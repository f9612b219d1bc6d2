// Session video: ffmpeg encodes WebM/VP8 at a low frame rate with libvpx's realtime
// deadline, so a recording costs little CPU on a 2-core host and plays in Chromium and
// Firefox without a plugin. The input differs per plane (x11grab of the display on
// computer_plane, screencast JPEG frames piped in on dom_plane); the file is finalized
// when the session closes.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { flag } from './flags.ts';
import { stopChild } from './procs.ts';

export const RECORDING_CONTENT_TYPE = 'video/webm';

export function recordingEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return flag(env.PLANE_RECORD, true);
}

export function recordingFps(env: NodeJS.ProcessEnv = process.env): number {
  const n = Number(env.PLANE_RECORD_FPS || 5);
  return Number.isFinite(n) && n >= 1 && n <= 30 ? n : 5;
}

const WEBM_OUT = ['-an', '-c:v', 'libvpx', '-deadline', 'realtime', '-cpu-used', '8', '-b:v', '600k', '-threads', '1', '-pix_fmt', 'yuv420p', '-f', 'webm'];

export class Recording {
  private readonly child: ChildProcess;
  private readonly exited: Promise<unknown>;
  private stopped = false;

  /** `input`: ffmpeg input arguments; `stdin`: true when frames are written to stdin; `env`: e.g. the display's XAUTHORITY. */
  constructor(
    readonly file: string,
    input: string[],
    readonly stdin: boolean,
    env: Record<string, string> = {},
  ) {
    mkdirSync(dirname(file), { recursive: true });
    this.child = spawn('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', ...(stdin ? [] : ['-nostdin']), ...input, ...WEBM_OUT, file], {
      stdio: [stdin ? 'pipe' : 'ignore', 'ignore', 'ignore'],
      env: { ...process.env, ...env },
    });
    this.child.stdin?.on('error', () => undefined);
    this.exited = once(this.child, 'exit').catch(() => undefined);
  }

  /** Writes one input frame (stdin recordings); drops it when ffmpeg is not keeping up. */
  write(frame: Buffer): void {
    const s = this.child.stdin;
    if (this.stopped || !s || s.writableNeedDrain) return;
    s.write(frame);
  }

  /** Ends the input and waits until ffmpeg has written the WebM cues and exited. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.stdin) this.child.stdin?.end();
    // x11grab has no end of input: SIGINT makes ffmpeg finish the file cleanly.
    else this.child.kill('SIGINT');
    const done = await Promise.race([this.exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 10_000).unref())]);
    if (!done) await stopChild(this.child, 'SIGKILL', 0);
  }
}
