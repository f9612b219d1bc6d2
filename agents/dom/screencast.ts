// dom_plane video: CDP screencast frames (JPEG, sent only when the page repaints) of
// the active tab, written to ffmpeg at a constant low rate (the latest frame repeats
// while nothing changes) and encoded to WebM by core/recording.ts. The recorder
// follows the active tab.
import type { CDPSession, Page } from 'puppeteer-core';
import { Recording } from '../core/recording.ts';
import type { Tabs } from './tabs.ts';

interface ScreencastFrame {
  data: string;
  sessionId: number;
}

export class ScreencastRecorder {
  private page: Page | undefined;
  private cdp: CDPSession | undefined;
  private latest: Buffer | undefined;
  private timer: NodeJS.Timeout | undefined;
  private switching = false;
  private readonly recording: Recording;

  constructor(
    private readonly tabs: Tabs,
    readonly file: string,
    private readonly fps: number,
    private readonly size: [number, number],
  ) {
    const [w, h] = size;
    this.recording = new Recording(file, ['-f', 'image2pipe', '-c:v', 'mjpeg', '-framerate', String(fps), '-i', 'pipe:0', '-vf', `scale=${w}:${h}`], true);
  }

  start(): void {
    this.timer = setInterval(() => this.tick(), 1000 / this.fps);
    this.tick();
  }

  private tick(): void {
    const active = this.tabs.active;
    if (active && active !== this.page && !active.isClosed() && !this.switching) void this.follow(active);
    if (this.latest) this.recording.write(this.latest);
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
    await this.recording.stop();
  }
}
