// A CDP screencast of whichever tab is active: JPEG frames Chromium sends only when
// the page repainted, each acknowledged at once; when another tab becomes active the
// cast moves to it. The video (screencast.ts) and the live screen (live.ts) each keep
// one, at their own size and quality.
import type { CDPSession, Page } from 'puppeteer-core';
import type { Tabs } from './tabs.ts';

interface ScreencastFrame {
  data: string;
  sessionId: number;
  metadata?: { deviceWidth?: number; deviceHeight?: number };
}

export interface CastOptions {
  quality: number;
  /** Chromium scales the frames to fit this */
  maxWidth: number;
  maxHeight: number;
  /** a frame of the active tab, with the page size it shows when Chromium says it */
  onFrame(jpeg: Buffer, width: number | undefined, height: number | undefined): void;
}

export class ActiveTabCast {
  private page: Page | undefined;
  private cdp: CDPSession | undefined;
  private following: Promise<void> | undefined;

  constructor(
    private readonly tabs: Tabs,
    private readonly o: CastOptions,
  ) {}

  /** Moves the cast to the active tab when that changed; resolves once it is there (or could not be: the next call tries again). */
  sync(): Promise<void> {
    const active = this.tabs.active;
    if (active && active !== this.page && !active.isClosed() && !this.following) this.following = this.follow(active).finally(() => (this.following = undefined));
    return this.following ?? Promise.resolve();
  }

  private async follow(page: Page): Promise<void> {
    await this.detach();
    try {
      const cdp = await page.createCDPSession();
      cdp.on('Page.screencastFrame', (e: ScreencastFrame) => {
        void cdp.send('Page.screencastFrameAck', { sessionId: e.sessionId }).catch(() => undefined);
        // a frame of the tab the cast just left is not the active tab's
        if (this.cdp !== cdp) return;
        const w = e.metadata?.deviceWidth;
        const h = e.metadata?.deviceHeight;
        this.o.onFrame(Buffer.from(e.data, 'base64'), w === undefined ? undefined : Math.round(w), h === undefined ? undefined : Math.round(h));
      });
      this.page = page;
      this.cdp = cdp;
      await cdp.send('Page.startScreencast', { format: 'jpeg', quality: this.o.quality, maxWidth: this.o.maxWidth, maxHeight: this.o.maxHeight, everyNthFrame: 1 });
    } catch {
      // the tab went away while we attached: the next sync follows the new active tab
      this.page = undefined;
      this.cdp = undefined;
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

  /** Ends the cast (a later sync starts it again). */
  async stop(): Promise<void> {
    await this.following;
    await this.detach();
  }
}
