// Session video: ffmpeg encodes WebM/VP8 at a low frame rate with libvpx's realtime
// deadline, so a recording costs little CPU on a 2-core host and plays in Chromium and
// Firefox without a plugin. The input differs per plane (x11grab of the display on
// computer_plane, screencast JPEG frames piped in on dom_plane); the file is finalized
// when the session closes.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { flag } from './flags.ts';
import { diesWithAgent, stopChild } from './procs.ts';

export const RECORDING_CONTENT_TYPE = 'video/webm';

export function recordingEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return flag(env.PLANE_RECORD, true);
}

/**
 * PLANE_RECORD_SIZE: the box a video frame fits in, `WxH` (each 64-3840), or `viewport`
 * for the viewport's own size. The default, 800x800, is Playwright's: a 1280x720 viewport
 * is recorded at 800x450. A full-size screencast made every click and screenshot of a
 * session 40-50 ms slower (Chromium encodes a JPEG of every repaint): see decisions.md.
 */
export function recordingBox(env: NodeJS.ProcessEnv = process.env): [number, number] | 'viewport' {
  const v = (env.PLANE_RECORD_SIZE ?? '').trim().toLowerCase();
  if (v === '') return [800, 800];
  if (v === 'viewport') return 'viewport';
  const m = /^(\d{2,4})x(\d{2,4})$/.exec(v);
  const [w, h] = [Number(m?.[1]), Number(m?.[2])];
  if (!m || w < 64 || h < 64 || w > 3840 || h > 3840) throw new Error(`PLANE_RECORD_SIZE must be WxH (each 64-3840) or viewport, got ${JSON.stringify(env.PLANE_RECORD_SIZE)}`);
  return [w, h];
}

/** The video's frame size for a viewport: scaled down to fit PLANE_RECORD_SIZE's box (never up), aspect kept, even sides (yuv420p needs them). */
export function recordingSize(viewport: readonly [number, number], env: NodeJS.ProcessEnv = process.env): [number, number] {
  const box = recordingBox(env);
  const [w, h] = viewport;
  const scale = box === 'viewport' ? 1 : Math.min(1, box[0] / w, box[1] / h);
  const even = (n: number): number => Math.max(2, Math.floor((n * scale) / 2) * 2);
  return [even(w), even(h)];
}

/** PLANE_RECORD_FPS: the video's most frames a second, 1-30 (default 5); anything else is refused (it fell back to 5 unsaid). */
export function recordingFps(env: NodeJS.ProcessEnv = process.env): number {
  const v = (env.PLANE_RECORD_FPS ?? '').trim();
  if (v === '') return 5;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 1 || n > 30) throw new Error(`PLANE_RECORD_FPS must be a number in [1, 30], got ${JSON.stringify(env.PLANE_RECORD_FPS)}`);
  return n;
}

/**
 * PLANE_RECORD_PACED (default on): dom_plane's screencast is stopped after each frame it
 * takes and started again a frame period later, so Chromium copies and encodes at most
 * about PLANE_RECORD_FPS frames a second instead of one per repaint (agents/dom/active-cast.ts).
 */
export function recordingPaced(env: NodeJS.ProcessEnv = process.env): boolean {
  return flag(env.PLANE_RECORD_PACED, true);
}

/** How long a stop waits for an x11grab recording's first output. */
const FIRST_OUTPUT_WAIT_MS = 3000;
const sizeOf = (file: string): number => {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
};

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
    this.child = spawn(...diesWithAgent('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', ...(stdin ? [] : ['-nostdin']), ...input, ...WEBM_OUT, file]), {
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
    else {
      // A short session on a loaded host can end before ffmpeg has grabbed its first frame:
      // interrupted then, it leaves no file or one without a frame (seen in full suite runs at
      // load 9). Its first output is waited for, briefly, while it runs.
      const until = Date.now() + FIRST_OUTPUT_WAIT_MS;
      while (this.child.exitCode === null && Date.now() < until && !(sizeOf(this.file) > 0)) await new Promise((r) => setTimeout(r, 50));
      // x11grab has no end of input: SIGINT makes ffmpeg finish the file cleanly.
      this.child.kill('SIGINT');
    }
    const done = await Promise.race([this.exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 10_000).unref())]);
    if (!done) await stopChild(this.child, 'SIGKILL', 0);
  }
}
