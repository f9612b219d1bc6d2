// A persistent capture of the display: one ffmpeg x11grab kept running, writing raw
// RGB frames to a pipe. A screenshot takes the first frame captured after the session's
// last input (so it shows the effect of that input; with no input since, the latest
// frame) and encodes it with sharp; an unchanged frame reuses its encoding. Spawning
// ffmpeg per screenshot costs ~170 ms instead.
import { spawn, type ChildProcess } from 'node:child_process';
import sharp from 'sharp';
import { stopChild } from '../core/procs.ts';

export type ImageFormat = 'png' | 'jpeg' | 'webp';

interface Frame {
  data: Buffer;
  at: number;
}

export class Grabber {
  private child: ChildProcess | undefined;
  private latest: Frame | undefined;
  private chunks: Buffer[] = [];
  private have = 0;
  private waiters: { after: number; resolve: (f: Frame) => void }[] = [];
  private readonly frameBytes: number;
  private encoded: { data: Buffer; format: ImageFormat; quality: number; out: Buffer } | undefined;

  constructor(
    private readonly display: string,
    readonly width: number,
    readonly height: number,
    private readonly fps: number,
    /** DISPLAY and XAUTHORITY of the display. */
    private readonly env: Record<string, string> = {},
  ) {
    this.frameBytes = width * height * 3;
  }

  start(): void {
    const child = spawn(
      'ffmpeg',
      ['-hide_banner', '-loglevel', 'error', '-nostdin', '-f', 'x11grab', '-draw_mouse', '0', '-framerate', String(this.fps),
        '-video_size', `${this.width}x${this.height}`, '-i', `${this.display}.0+0,0`, '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1'],
      { stdio: ['ignore', 'pipe', 'ignore'], env: { ...process.env, ...this.env } },
    );
    // x11grab grabs on its tick and writes at once: the capture instant is the arrival
    // minus the grab and pipe time (a few ms at 1280x720), never a whole interval.
    const lag = Math.min(1000 / this.fps, 10);
    child.stdout?.on('data', (d: Buffer) => {
      this.chunks.push(d);
      this.have += d.length;
      while (this.have >= this.frameBytes) {
        const all = Buffer.concat(this.chunks);
        const frame: Frame = { data: all.subarray(0, this.frameBytes), at: Math.round(Date.now() - lag) };
        const rest = all.subarray(this.frameBytes);
        this.chunks = rest.length ? [rest] : [];
        this.have = rest.length;
        this.latest = frame;
        const ready = this.waiters.filter((w) => frame.at >= w.after);
        this.waiters = this.waiters.filter((w) => frame.at < w.after);
        for (const w of ready) w.resolve(frame);
      }
    });
    this.child = child;
  }

  /** A frame begun after `after` (unix ms), or the latest one if none comes in time. */
  async frame(after: number, timeoutMs = 3000): Promise<Frame> {
    if (this.latest && this.latest.at >= after) return this.latest;
    return new Promise<Frame>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== entry);
        if (this.latest) resolve(this.latest);
        else reject(new Error('display capture produced no frame'));
      }, timeoutMs);
      const entry = {
        after,
        resolve: (f: Frame) => {
          clearTimeout(timer);
          resolve(f);
        },
      };
      this.waiters.push(entry);
    });
  }

  async encode(frame: Frame, format: ImageFormat, quality = 80): Promise<Buffer> {
    const last = this.encoded;
    // A still screen gives byte-identical frames: reuse the last encoding (a 2.7 MB
    // compare is ~0.2 ms; a PNG encode is ~10 ms).
    if (last && last.format === format && last.quality === quality && (last.data === frame.data || last.data.equals(frame.data))) return last.out;
    const img = sharp(frame.data, { raw: { width: this.width, height: this.height, channels: 3 } });
    let out: Buffer;
    if (format === 'jpeg') out = await img.jpeg({ quality }).toBuffer();
    else if (format === 'webp') out = await img.webp({ quality, effort: 0 }).toBuffer();
    // Level 1, no adaptive filtering, no palette: the fastest lossless PNG sharp makes.
    else out = await img.png({ compressionLevel: 1, adaptiveFiltering: false, palette: false }).toBuffer();
    this.encoded = { data: frame.data, format, quality, out };
    return out;
  }

  async stop(): Promise<void> {
    await stopChild(this.child, 'SIGKILL');
    this.child = undefined;
  }
}
