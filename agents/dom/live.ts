// dom_plane's live screen: a CDP screencast of the active tab (JPEG frames Chromium
// sends only when the page repainted) for `live/frame`, and a person's input as raw
// DevTools input on the same tab for `live/input` (Input.dispatchMouseEvent,
// dispatchKeyEvent, insertText): real input events, as trusted as a person's. The
// screencast runs while somebody watches: it starts with the first frame asked for
// and stops once nobody asked for IDLE_MS. It follows the active tab, as the video does.
import type { CDPSession, Page } from 'puppeteer-core';
import { FrameBox, type Button, type LiveFrame, type LiveInput, type LiveScreen, type Modifier } from '../core/live.ts';
import type { Tabs } from './tabs.ts';
import { ActiveTabCast } from './active-cast.ts';

const IDLE_MS = 10_000;
const QUALITY = 70;

const MODIFIER_BIT: Record<Modifier, number> = { Alt: 1, Control: 2, Meta: 4, Shift: 8 };
const BUTTON_BIT: Record<Button, number> = { left: 1, right: 2, middle: 4 };

export const modifierBits = (mods: readonly Modifier[]): number => mods.reduce((n, m) => n | MODIFIER_BIT[m], 0);

/** Windows virtual key codes of named keys, for a browser that sent no keyCode. */
const VK: Record<string, number> = {
  Backspace: 8, Tab: 9, Enter: 13, Shift: 16, Control: 17, Alt: 18, Pause: 19, CapsLock: 20, Escape: 27, ' ': 32,
  PageUp: 33, PageDown: 34, End: 35, Home: 36, ArrowLeft: 37, ArrowUp: 38, ArrowRight: 39, ArrowDown: 40,
  Insert: 45, Delete: 46, Meta: 91, ContextMenu: 93,
};

/** The virtual key code of a key: the browser's own, else by name, else a letter or digit's. */
export function virtualKeyCode(key: string, code: string, given: number | undefined): number {
  if (given !== undefined && given > 0) return given;
  if (VK[key] !== undefined) return VK[key];
  const f = /^F([1-9]|1[0-2])$/.exec(key);
  if (f) return 111 + Number(f[1]);
  const m = /^(?:Key([A-Z])|Digit([0-9]))$/.exec(code);
  if (m) return (m[1] ?? m[2]!).charCodeAt(0);
  return key.length === 1 ? key.toUpperCase().charCodeAt(0) : 0;
}

/** What a key types: a character key without Control, Alt or Meta types itself; Enter types a carriage return. */
export function keyText(key: string, mods: readonly Modifier[]): string | undefined {
  if (mods.some((m) => m !== 'Shift')) return undefined;
  if (key === 'Enter') return '\r';
  return [...key].length === 1 ? key : undefined;
}

export class DomLiveScreen implements LiveScreen {
  private readonly box = new FrameBox();
  private readonly cast: ActiveTabCast;
  private askedAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly inputSessions = new WeakMap<Page, Promise<CDPSession>>();
  private buttons = 0;

  constructor(
    private readonly tabs: Tabs,
    viewport: [number, number],
  ) {
    this.cast = new ActiveTabCast(tabs, { quality: QUALITY, maxWidth: viewport[0], maxHeight: viewport[1], onFrame: (jpeg, w, h) => this.box.publish(jpeg, w ?? viewport[0], h ?? viewport[1]) });
  }

  async frame(after: number, waitMs: number): Promise<LiveFrame | undefined> {
    this.askedAt = Date.now();
    if (!this.timer) {
      this.timer = setInterval(() => this.tick(), 250);
      this.timer.unref();
    }
    await this.tick();
    return this.box.next(after, waitMs);
  }

  /** Follows the active tab; stops the screencast once nobody asked for a frame in IDLE_MS. */
  private async tick(): Promise<void> {
    if (Date.now() - this.askedAt > IDLE_MS) {
      await this.stop();
      return;
    }
    await this.cast.sync();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.cast.stop();
  }

  private async session(): Promise<CDPSession> {
    const page = await this.tabs.current();
    let s = this.inputSessions.get(page);
    if (!s) {
      s = page.createCDPSession();
      this.inputSessions.set(page, s);
      s.catch(() => this.inputSessions.delete(page));
    }
    return s;
  }

  async input(i: LiveInput): Promise<void> {
    const cdp = await this.session();
    switch (i.type) {
      case 'mouse': {
        const modifiers = modifierBits(i.modifiers);
        if (i.action === 'move') {
          const held = (['left', 'right', 'middle'] as const).find((b) => this.buttons & BUTTON_BIT[b]) ?? 'none';
          await cdp.send('Input.dispatchMouseEvent', { type: 'mouseMoved', x: i.x, y: i.y, button: held, buttons: this.buttons, modifiers });
          return;
        }
        if (i.action === 'down') this.buttons |= BUTTON_BIT[i.button];
        else this.buttons &= ~BUTTON_BIT[i.button];
        await cdp.send('Input.dispatchMouseEvent', { type: i.action === 'down' ? 'mousePressed' : 'mouseReleased', x: i.x, y: i.y, button: i.button, buttons: this.buttons, clickCount: i.clicks, modifiers });
        return;
      }
      case 'wheel':
        await cdp.send('Input.dispatchMouseEvent', { type: 'mouseWheel', x: i.x, y: i.y, deltaX: i.dx, deltaY: i.dy, modifiers: modifierBits(i.modifiers) });
        return;
      case 'key': {
        const vk = virtualKeyCode(i.key, i.code, i.key_code);
        const location = /Left$/.test(i.code) && i.key.length > 1 ? 1 : /Right$/.test(i.code) && i.key.length > 1 && !i.code.startsWith('Arrow') ? 2 : /^Numpad/.test(i.code) ? 3 : 0;
        const base = { key: i.key, code: i.code, windowsVirtualKeyCode: vk, nativeVirtualKeyCode: vk, modifiers: modifierBits(i.modifiers), location };
        if (i.action === 'up') {
          await cdp.send('Input.dispatchKeyEvent', { type: 'keyUp', ...base });
          return;
        }
        const text = keyText(i.key, i.modifiers);
        await cdp.send('Input.dispatchKeyEvent', text ? { type: 'keyDown', ...base, text, unmodifiedText: text } : { type: 'rawKeyDown', ...base });
        return;
      }
      case 'paste':
        await cdp.send('Input.insertText', { text: i.text });
        return;
    }
  }
}
