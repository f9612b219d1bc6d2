// computer_plane's live screen: the display capture the screenshots already use,
// cropped to where the page is drawn (below the browser's tab strip and toolbar, from
// the page facts), as JPEG once its pixels changed and at most MAX_FPS times a second;
// and a person's input by xdotool on the display, without the behavioural jitter (a
// person's own pointer path is the human one). The page's CSS pixels are the display's
// pixels (Xvfb has one device pixel per CSS pixel) offset by the page's place on it.
import type Sharp from 'sharp';
import { FrameBox, type Button, type LiveFrame, type LiveInput, type LiveScreen } from '../core/live.ts';
import type { ContentRect, PageFactsTracker } from './page-facts.ts';
import type { Grabber } from './grabber.ts';
import type { XInput } from './xinput.ts';
import { keyArgv } from './live-keys.ts';
import type { DisplayTyper } from './typer.ts';

const IDLE_MS = 10_000;
const MAX_FPS = 10;
const QUALITY = 70;
/** How long the page's place on the display is trusted before it is read again. */
const RECT_MS = 1000;
/** CSS pixels of wheel delta per wheel click (Chromium on X11 scrolls about this much per notch; browsers report 100 per notch). */
const WHEEL_UNIT = 100;
const BUTTON: Record<Button, string> = { left: '1', middle: '2', right: '3' };
const TIMEOUT_MS = 5000;
// loaded with the first frame, not before the agent listens (as the grabber's)
let sharpLoad: Promise<typeof Sharp> | undefined;
const loadSharp = (): Promise<typeof Sharp> => (sharpLoad ??= import('sharp').then((m) => m.default));

export class ComputerLiveScreen implements LiveScreen {
  private readonly box = new FrameBox();
  private off: (() => void) | undefined;
  private askedAt = 0;
  private timer: NodeJS.Timeout | undefined;
  /** the raw pixels last published, and the page's place they were cropped to */
  private shown: Buffer | undefined;
  private shownRect = '';
  private publishedAt = 0;
  private encoding = false;
  private rect: ContentRect | undefined;
  private rectAt = 0;
  private rectReading: Promise<ContentRect> | undefined;
  private wheel = { x: 0, y: 0 };

  constructor(
    private readonly grabber: Grabber,
    private readonly x: XInput,
    private readonly facts: PageFactsTracker | undefined,
    /** types text, binding the characters the display's keyboard has no key for first */
    private readonly typer: DisplayTyper,
  ) {}

  /** Types `text` on the display, characters beyond its keyboard bound first (typer.ts). */
  private async type(text: string): Promise<void> {
    const r = await this.typer.type(text, ['--clearmodifiers', '--delay', '2'], TIMEOUT_MS);
    if (r.returncode !== 0) throw new Error(`xdotool type failed: ${r.stderr.slice(0, 200)}`);
  }

  async frame(after: number, waitMs: number): Promise<LiveFrame | undefined> {
    this.askedAt = Date.now();
    if (!this.off) {
      this.off = this.grabber.onFrame((f) => void this.consider(f.data));
      this.timer = setInterval(() => {
        if (Date.now() - this.askedAt > IDLE_MS) this.stop();
      }, 1000);
      this.timer.unref();
      // the first picture now, not at the next change
      const latest = await this.grabber.frame(0).catch(() => undefined);
      if (latest) await this.consider(latest.data);
    }
    return this.box.next(after, waitMs);
  }

  stop(): void {
    this.off?.();
    this.off = undefined;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.shown = undefined;
  }

  /** The page's place on the display (read at most every RECT_MS); the whole display without page facts. */
  private async pageRect(): Promise<ContentRect> {
    const whole = { x: 0, y: 0, width: this.grabber.width, height: this.grabber.height };
    if (!this.facts) return whole;
    if (this.rect && Date.now() - this.rectAt < RECT_MS) return this.rect;
    this.rectReading ??= this.facts
      .content(whole)
      .then((r) => {
        this.rect = r ?? this.rect ?? whole;
        this.rectAt = Date.now();
        return this.rect;
      })
      .finally(() => (this.rectReading = undefined));
    return this.rectReading;
  }

  /** Publishes a captured picture when it differs from the last published and the rate allows. */
  private async consider(data: Buffer): Promise<void> {
    if (this.encoding || Date.now() - this.publishedAt < 1000 / MAX_FPS) return;
    this.encoding = true;
    try {
      const r = await this.pageRect();
      const key = `${r.x},${r.y},${r.width},${r.height}`;
      if (this.shown && key === this.shownRect && (this.shown === data || this.shown.equals(data))) return;
      const jpeg = await (await loadSharp())(data, { raw: { width: this.grabber.width, height: this.grabber.height, channels: 3 } })
        .extract({ left: r.x, top: r.y, width: r.width, height: r.height })
        .jpeg({ quality: QUALITY })
        .toBuffer();
      this.shown = data;
      this.shownRect = key;
      this.publishedAt = Date.now();
      this.box.publish(jpeg, r.width, r.height);
    } catch {
      // a picture that could not be cut (the window moved meanwhile): the next one will be
    } finally {
      this.encoding = false;
    }
  }

  /** Display pixels of a page point, kept on the page (a point past its edge lands on its edge, never on the toolbar). */
  private async at(px: number, py: number): Promise<[string, string]> {
    const r = await this.pageRect();
    const x = r.x + Math.min(Math.max(0, Math.round(px)), r.width - 1);
    const y = r.y + Math.min(Math.max(0, Math.round(py)), r.height - 1);
    return [String(x), String(y)];
  }

  private async run(argv: string[]): Promise<void> {
    const r = await this.x.run(argv, TIMEOUT_MS);
    if (r.returncode !== 0) throw new Error(`xdotool ${argv[0]} failed: ${r.stderr.slice(0, 200)}`);
  }

  async input(i: LiveInput): Promise<void> {
    switch (i.type) {
      case 'mouse': {
        const [x, y] = await this.at(i.x, i.y);
        if (i.action === 'move') return this.run(['mousemove', x, y]);
        return this.run(['mousemove', x, y, i.action === 'down' ? 'mousedown' : 'mouseup', BUTTON[i.button]]);
      }
      case 'wheel': {
        const [x, y] = await this.at(i.x, i.y);
        // deltas accumulate until they make a whole click (a touchpad sends many small ones); a turn back starts afresh
        for (const [axis, d, less, more] of [['y', i.dy, '4', '5'], ['x', i.dx, '6', '7']] as const) {
          if (d === 0) continue;
          if (Math.sign(this.wheel[axis]) !== Math.sign(d)) this.wheel[axis] = 0;
          this.wheel[axis] += d;
          const clicks = Math.trunc(this.wheel[axis] / WHEEL_UNIT);
          if (clicks === 0) continue;
          this.wheel[axis] -= clicks * WHEEL_UNIT;
          await this.run(['mousemove', x, y, 'click', '--repeat', String(Math.min(20, Math.abs(clicks))), '--delay', '0', clicks > 0 ? more : less]);
        }
        return;
      }
      case 'key': {
        const argv = keyArgv(i.action, i.key, i.code);
        // a character beyond the keyboard goes in as text, bound first (keymap.ts)
        if (argv?.[0] === 'type') return this.type(argv.at(-1)!);
        if (argv) await this.run(argv);
        return;
      }
      case 'paste':
        // the person's Control (of Ctrl+V) may be down on the display: typed without it, then restored;
        // characters beyond the display's US layout (ü, €, 中) are bound to keys first (keymap.ts)
        return this.type(i.text);
    }
  }
}
