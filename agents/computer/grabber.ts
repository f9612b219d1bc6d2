// A persistent capture of the display: one ffmpeg x11grab kept running, writing raw
// RGB frames to a pipe. A screenshot takes the first frame that started after the
// request arrived (so it shows the effect of earlier input) and encodes it with sharp;
// spawning ffmpeg per screenshot costs ~170 ms instead.
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

  constructor(
    private readonly display: string,
    readonly width: number,
    readonly height: number,
    private readonly fps: number,
  ) {
    this.frameBytes = width * height * 3;
  }

  start(): void {
    const child = spawn(
      'ffmpeg',
      ['-hide_banner', '-loglevel', 'error', '-nostdin', '-f', 'x11grab', '-draw_mouse', '0', '-framerate', String(this.fps),
        '-video_size', `${this.width}x${this.height}`, '-i', `${this.display}.0+0,0`, '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1'],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    // Frame start time: a frame that completes at t began about one interval earlier.
    const interval = 1000 / this.fps;
    child.stdout?.on('data', (d: Buffer) => {
      this.chunks.push(d);
      this.have += d.length;
      while (this.have >= this.frameBytes) {
        const all = Buffer.concat(this.chunks);
        const frame: Frame = { data: all.subarray(0, this.frameBytes), at: Math.round(Date.now() - interval) };
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
    const img = sharp(frame.data, { raw: { width: this.width, height: this.height, channels: 3 } });
    if (format === 'jpeg') return img.jpeg({ quality }).toBuffer();
    if (format === 'webp') return img.webp({ quality }).toBuffer();
    // Level 1: ~3x faster than the default and still lossless.
    return img.png({ compressionLevel: 1 }).toBuffer();
  }

  async stop(): Promise<void> {
    await stopChild(this.child, 'SIGKILL');
    this.child = undefined;
  }
}
