// A persistent capture of the display: one ffmpeg x11grab kept running, writing raw
// RGB frames to a pipe. A screenshot takes the first frame captured after the session's
// last input (so it shows the effect of that input; with no input since, the latest
// frame) and encodes it with sharp; an unchanged frame reuses its encoding. Spawning
// ffmpeg per screenshot costs ~170 ms instead.
//
// A frame's capture instant is x11grab's own wall-clock timestamp, printed per frame on
// ffmpeg's stderr, never its arrival here: a busy agent drains the pipe late, and a frame
// then arrived 0.3-0.6 s after it was grabbed, so an arrival stamp took a frame of the
// page before an input for one after it (docs/decisions.md; npm run bench:grab).
import { spawn, type ChildProcess } from 'node:child_process';
import type Sharp from 'sharp';
import { diesWithAgent, stopChild } from '../core/procs.ts';

// sharp (a native module) is loaded with the first encode, not before the agent listens
let sharpLoad: Promise<typeof Sharp> | undefined;
const sharp = (): Promise<typeof Sharp> => (sharpLoad ??= import('sharp').then((m) => m.default));

export type ImageFormat = 'png' | 'jpeg' | 'webp';

/**
 * A captured frame, held as the pipe's chunks until something reads its pixels: at 15
 * frames a second of 2.6 MB, joining every frame (a fresh 2.6 MB buffer each) cost a
 * computer agent ~0.15 of a core in copies and page faults, for frames nobody looked at
 * (only the first after an input is encoded).
 */
class Frame {
  private joined: Buffer | undefined;
  constructor(
    private parts: Buffer[],
    private readonly bytes: number,
    readonly at: number,
  ) {}

  get data(): Buffer {
    if (!this.joined) {
      this.joined = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.bytes);
      this.parts = [];
    }
    return this.joined;
  }
}

/** The metadata filter's line for each frame: `frame:12 pts:1795724721922768 pts_time:...` */
const STAMP = /\bframe:(\d+)\s+pts:(\d+)/;
/** Frames held for their stamp at most: past that, a frame is stamped when it arrived (late, never early, so no wrong frame is taken). */
const MAX_UNSTAMPED = 8;

export class Grabber {
  private child: ChildProcess | undefined;
  private latest: Frame | undefined;
  private chunks: Buffer[] = [];
  private have = 0;
  /** frames read (their index in ffmpeg's count) and stamps read, by frame index */
  private framesRead = 0;
  private unstamped = new Map<number, { parts: Buffer[]; arrived: number }>();
  private stamps = new Map<number, number>();
  private waiters: { after: number; resolve: (f: Frame) => void }[] = [];
  private readonly listeners = new Set<(f: Frame, arrived: number) => void>();
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

  /** Starts capturing; a no-op when it already is. */
  start(): void {
    if (this.child) return;
    const child = spawn(
      // info level for the metadata filter's per-frame lines; passthrough so that ffmpeg never
      // repeats an old frame to keep a constant rate (a repeat would be stamped as new); one
      // encoder thread, as frame threads hold each frame back until the next is grabbed (+67 ms)
      ...diesWithAgent('ffmpeg', ['-hide_banner', '-nostats', '-loglevel', 'info', '-nostdin', '-f', 'x11grab', '-draw_mouse', '0', '-framerate', String(this.fps),
        '-video_size', `${this.width}x${this.height}`, '-i', `${this.display}.0+0,0`, '-copyts', '-fps_mode', 'passthrough',
        '-vf', 'metadata=mode=add:key=grab:value=1,metadata=mode=print', '-threads', '1', '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1']),
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...this.env } },
    );
    child.stdout?.on('data', (d: Buffer) => {
      // cut the chunk at frame ends, without copying
      for (let off = 0; off < d.length; ) {
        const take = Math.min(this.frameBytes - this.have, d.length - off);
        this.chunks.push(d.subarray(off, off + take));
        this.have += take;
        off += take;
        if (this.have < this.frameBytes) break;
        this.unstamped.set(this.framesRead++, { parts: this.chunks, arrived: Date.now() });
        this.chunks = [];
        this.have = 0;
        this.publish();
      }
    });
    let line = '';
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (d: string) => {
      line += d;
      for (let i = line.indexOf('\n'); i >= 0; i = line.indexOf('\n')) {
        const m = STAMP.exec(line.slice(0, i));
        line = line.slice(i + 1);
        // x11grab's pts: microseconds of the wall clock when it grabbed the frame
        if (m) this.stamps.set(Number(m[1]), Math.round(Number(m[2]) / 1000));
      }
      if (line.length > 4096) line = '';
      this.publish();
    });
    this.child = child;
  }

  /** Pairs frames with their capture stamps by ffmpeg's frame index (either may arrive first), in order. */
  private publish(): void {
    for (const [n, f] of this.unstamped) {
      let at = this.stamps.get(n);
      // a stamp not come (another ffmpeg's log format): the arrival is later than the capture, which only waits longer
      if (at === undefined && this.unstamped.size > MAX_UNSTAMPED) at = f.arrived;
      if (at === undefined) break;
      this.unstamped.delete(n);
      this.stamps.delete(n);
      const frame = new Frame(f.parts, this.frameBytes, at);
      this.latest = frame;
      for (const l of this.listeners) l(frame, f.arrived);
      const ready = this.waiters.filter((w) => frame.at >= w.after);
      this.waiters = this.waiters.filter((w) => frame.at < w.after);
      for (const w of ready) w.resolve(frame);
    }
    for (const n of this.stamps.keys()) if (n < this.framesRead - MAX_UNSTAMPED) this.stamps.delete(n);
  }

  /** Calls `fn` with each frame as it is published, and when it arrived here (bench/planes/grab-lag); returns the unsubscribe. */
  onFrame(fn: (f: Frame, arrived: number) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
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
    const img = (await sharp())(frame.data, { raw: { width: this.width, height: this.height, channels: 3 } });
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
