// A CDP screencast of whichever tab is active: JPEG frames Chromium sends only when
// the page repainted, each acknowledged at once; when another tab becomes active the
// cast moves to it. The video (screencast.ts) and the live screen (live.ts) each keep
// one, at their own size and quality.
//
// Paced (`paceMs`, the video's): Chromium copies and encodes a frame for every repaint
// (typing a character is one), and dropping frames after they came (everyNthFrame, late
// acks) saves none of the copy and loses the page's last picture. So after a frame is
// taken the cast is stopped, and started again `paceMs` later: a started screencast sends
// the picture last drawn at once, so a change made while it was stopped is in that first
// frame. If that frame is the one last taken, the page did not change and the cast keeps
// running, waiting for the next repaint (a still page costs nothing); otherwise it is
// taken and the cast pauses again.
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
  /** at most one frame taken per this many ms (see above); none: every repaint */
  paceMs?: number;
  /** a frame of the active tab, with the page size it shows when Chromium says it */
  onFrame(jpeg: Buffer, width: number | undefined, height: number | undefined): void;
}

/** How long stop() waits for the last picture of a paused cast. */
const LAST_PICTURE_WAIT_MS = 1000;

export class ActiveTabCast {
  private page: Page | undefined;
  private cdp: CDPSession | undefined;
  private following: Promise<void> | undefined;
  /** the paced cast is stopped until this timer restarts it */
  private resume: NodeJS.Timeout | undefined;
  /** the next frame is a restarted cast's first: the picture last drawn */
  private restarted = false;
  /** the base64 of the frame last taken */
  private taken: string | undefined;
  /** resolves when a frame arrives (stop() of a paused cast waits for one) */
  private arrived: (() => void) | undefined;

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

  private start(cdp: CDPSession): Promise<unknown> {
    return cdp.send('Page.startScreencast', { format: 'jpeg', quality: this.o.quality, maxWidth: this.o.maxWidth, maxHeight: this.o.maxHeight, everyNthFrame: 1 });
  }

  private async follow(page: Page): Promise<void> {
    await this.detach();
    try {
      const cdp = await page.createCDPSession();
      cdp.on('Page.screencastFrame', (e: ScreencastFrame) => {
        void cdp.send('Page.screencastFrameAck', { sessionId: e.sessionId }).catch(() => undefined);
        // a frame of the tab the cast just left is not the active tab's
        if (this.cdp !== cdp) return;
        this.arrived?.();
        if (this.o.paceMs !== undefined) {
          const unchanged = this.restarted && e.data === this.taken;
          this.restarted = false;
          if (unchanged) return;
          this.taken = e.data;
          if (!this.resume) this.pause(cdp, this.o.paceMs);
        }
        const w = e.metadata?.deviceWidth;
        const h = e.metadata?.deviceHeight;
        this.o.onFrame(Buffer.from(e.data, 'base64'), w === undefined ? undefined : Math.round(w), h === undefined ? undefined : Math.round(h));
      });
      this.page = page;
      this.cdp = cdp;
      await this.start(cdp);
    } catch {
      // the tab went away while we attached: the next sync follows the new active tab
      this.page = undefined;
      this.cdp = undefined;
    }
  }

  private pause(cdp: CDPSession, ms: number): void {
    void cdp.send('Page.stopScreencast').catch(() => undefined);
    this.resume = setTimeout(() => {
      this.resume = undefined;
      if (this.cdp !== cdp) return;
      this.restarted = true;
      void this.start(cdp).catch(() => undefined);
    }, ms);
  }

  private async detach(): Promise<void> {
    const cdp = this.cdp;
    this.cdp = undefined;
    this.page = undefined;
    clearTimeout(this.resume);
    this.resume = undefined;
    this.restarted = false;
    if (!cdp) return;
    await cdp.send('Page.stopScreencast').catch(() => undefined);
    await cdp.detach().catch(() => undefined);
  }

  /**
   * Ends the cast (a later sync starts it again). With `lastPicture` (the video's end) the
   * cast is started once more and its first frame, the picture last drawn, taken: a change
   * made just before would otherwise be missed while the cast is paused, and unpaced too
   * when its frame was still on its way.
   */
  async stop(lastPicture = false): Promise<void> {
    await this.following;
    const cdp = this.cdp;
    clearTimeout(this.resume);
    this.resume = undefined;
    if (cdp && lastPicture) {
      // taken whatever it shows: the unchanged check would only skip a picture already taken
      this.restarted = false;
      // a frame still on its way from before the stop is not the picture last drawn: the stop's
      // answer comes after it (one connection, in order), so the wait starts after that answer
      // (without this the unpaced video ended on the picture before the last, 1 run in 2 here)
      await cdp.send('Page.stopScreencast').catch(() => undefined);
      const got = new Promise<void>((r) => (this.arrived = r));
      await this.start(cdp).catch(() => undefined);
      await Promise.race([got, new Promise((r) => setTimeout(r, LAST_PICTURE_WAIT_MS).unref())]);
      this.arrived = undefined;
    }
    await this.detach();
  }
}
