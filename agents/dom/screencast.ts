// dom_plane video: CDP screencast frames (JPEG, sent only when the page repaints) of
// the active tab, written to ffmpeg at most `fps` times a second and encoded to WebM
// by core/recording.ts. The video has a variable frame rate: ffmpeg stamps each frame
// with the wall clock when it reads it, so a frame is written when the page changed,
// and while nothing changes only once a second (the video still runs as long as the
// session, and a seek to a moment of the session lands on what the page showed).
// Encoding a repeated frame cost as much as a new one: a static page cost `fps`
// frames a second, now one. The recorder follows the active tab.
import type { CDPSession, Page } from 'puppeteer-core';
import { Recording } from '../core/recording.ts';
import type { Tabs } from './tabs.ts';

interface ScreencastFrame {
  data: string;
  sessionId: number;
}

/** While the page shows the same picture, it is written again this often. */
const HEARTBEAT_MS = 1000;

export class ScreencastRecorder {
  private page: Page | undefined;
  private cdp: CDPSession | undefined;
  private latest: Buffer | undefined;
  /** the frame last written, and when */
  private written: Buffer | undefined;
  private writtenAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private switching = false;
  private readonly recording: Recording;

  constructor(
    private readonly tabs: Tabs,
    readonly file: string,
    private readonly fps: number,
    /** the video's frame size (core/recording.ts recordingSize): Chromium scales the screencast to it, so it encodes no more pixels than the video keeps */
    private readonly size: [number, number],
  ) {
    const [w, h] = size;
    this.recording = new Recording(file, ['-use_wallclock_as_timestamps', '1', '-f', 'image2pipe', '-c:v', 'mjpeg', '-i', 'pipe:0', '-fps_mode', 'vfr', '-vf', `scale=${w}:${h}`], true);
  }

  start(): void {
    this.timer = setInterval(() => this.tick(), 1000 / this.fps);
    this.tick();
  }

  private tick(): void {
    const active = this.tabs.active;
    if (active && active !== this.page && !active.isClosed() && !this.switching) void this.follow(active);
    if (this.latest && (this.latest !== this.written || Date.now() - this.writtenAt >= HEARTBEAT_MS)) this.write(this.latest);
  }

  private write(frame: Buffer): void {
    this.written = frame;
    this.writtenAt = Date.now();
    this.recording.write(frame);
  }

  private async follow(page: Page): Promise<void> {
    this.switching = true;
    try {
      await this.detach();
      const cdp = await page.createCDPSession();
      cdp.on('Page.screencastFrame', (e: ScreencastFrame) => {
        this.latest = Buffer.from(e.data, 'base64');
        void cdp.send('Page.screencastFrameAck', { sessionId: e.sessionId }).catch(() => undefined);
      });
      await cdp.send('Page.startScreencast', { format: 'jpeg', quality: 60, maxWidth: this.size[0], maxHeight: this.size[1], everyNthFrame: 1 });
      this.page = page;
      this.cdp = cdp;
    } catch {
      // The tab went away while we attached; the next tick follows the new active tab.
    } finally {
      this.switching = false;
    }
  }

  private async detach(): Promise<void> {
    const cdp = this.cdp;
    this.cdp = undefined;
    this.page = undefined;
    if (!cdp) return;
    await cdp.send('Page.stopScreencast').catch(() => undefined);
    await cdp.detach().catch(() => undefined);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.detach();
    // the last picture once more, stamped now: the video lasts until the session's end
    if (this.latest) this.write(this.latest);
    await this.recording.stop();
  }
}
