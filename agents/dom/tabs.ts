// Stable tab ids over puppeteer pages: an id is given once per page and never reused,
// so a client can hold it across calls. The active tab is the one brought to front last.
// The tabs are those of the session's browser context only (a reused browser may hold others).
// A popup an input opens is followed (docs/decisions.md, issue 40): it becomes the active
// tab, as the new tab takes the focus in a browser a person uses; the opener stays open.
// A JavaScript dialog (alert, confirm, prompt, beforeunload) blocks the page and every
// input and evaluate on it until handled: the session handles each as its policy says
// (dismissed by default, as Playwright does) and keeps what it saw for the next answer,
// unless a CDP client of the session's own handles them (then they are left to it).
import type { BrowserContext, Dialog, Page, Target } from 'puppeteer-core';
import { notFound } from '../core/errors.ts';
import { pageEvents } from './settle.ts';

/** What a session did with a dialog a page opened. */
export interface SeenDialog {
  type: string;
  message: string;
  action: 'dismissed' | 'accepted' | 'left';
}

/** dismiss: alert closed, confirm false, prompt null; accept: confirm true, prompt its default; a beforeunload is accepted either way (the navigation asked for goes on). */
export type DialogPolicy = 'dismiss' | 'accept';

const MAX_SEEN = 20;

export class Tabs {
  private readonly ids = new Map<Page, string>();
  private seen: SeenDialog[] = [];
  /** a CDP client of the session handles dialogs itself from the moment it connects */
  private clientHandles = false;
  private next = 1;
  active: Page | undefined;
  /** Pages seen opening, by opener page, for catching popups. */
  private readonly popupWaiters = new Set<(p: Page, opener: Target | undefined) => void>();
  /** Page targets seen opening, told at once (their page is attached later). */
  private readonly openWatchers = new Set<(t: Target) => void>();

  constructor(
    private readonly context: BrowserContext,
    private readonly dialogs: DialogPolicy = 'dismiss',
  ) {
    context.on('targetcreated', (t: Target) => {
      if (t.type() !== 'page') return;
      for (const w of this.openWatchers) w(t);
      void t.page().then((p) => {
        if (!p) return;
        this.idOf(p);
        // a CDP client's page is the one it drives: screenshots and the trace follow it
        if (this.clientHandles) this.active = p;
        for (const w of this.popupWaiters) w(p, t.opener());
      });
    });
    context.on('targetchanged', (t: Target) => {
      if (!this.clientHandles || t.type() !== 'page') return;
      void t.page().then((p) => {
        if (p && !p.isClosed()) this.active = p;
      });
    });
  }

  async init(): Promise<void> {
    const pages = await this.context.pages();
    for (const p of pages) this.idOf(p);
    this.active = pages[0] ?? (await this.context.newPage());
    this.idOf(this.active);
  }

  idOf(p: Page): string {
    let id = this.ids.get(p);
    if (!id) {
      id = `tab-${this.next++}`;
      this.ids.set(p, id);
      p.on('dialog', (d: Dialog) => void this.onDialog(d));
      p.once('close', () => {
        if (this.active === p) this.active = undefined;
      });
    }
    return id;
  }

  private async onDialog(d: Dialog): Promise<void> {
    const type = d.type();
    const message = d.message().slice(0, 200);
    if (this.clientHandles) {
      this.note({ type, message, action: 'left' });
      return;
    }
    const accept = type === 'beforeunload' || this.dialogs === 'accept';
    // a dialog the page closed itself (it navigated away) is gone: nothing to handle
    await (accept ? d.accept(type === 'prompt' ? d.defaultValue() : undefined) : d.dismiss()).catch(() => undefined);
    this.note({ type, message, action: accept ? 'accepted' : 'dismissed' });
  }

  private note(d: SeenDialog): void {
    if (this.seen.length < MAX_SEEN) this.seen.push(d);
  }

  /** The dialogs seen since the last call. */
  takeDialogs(): SeenDialog[] {
    const out = this.seen;
    this.seen = [];
    return out;
  }

  /** From now on a CDP client of the session's own handles the dialogs (puppeteer's page.on('dialog'), Playwright's). */
  leaveDialogsToClient(): void {
    this.clientHandles = true;
  }

  async list(): Promise<Page[]> {
    return (await this.context.pages()).filter((p) => !p.isClosed());
  }

  async byId(tabId: string): Promise<Page> {
    for (const p of await this.list()) if (this.ids.get(p) === tabId) return p;
    throw notFound(`no open tab with tab_id ${tabId}`);
  }

  /** The active page, falling back to another open page (or a fresh blank one). */
  async current(): Promise<Page> {
    if (this.active && !this.active.isClosed()) return this.active;
    const pages = await this.list();
    this.active = pages[pages.length - 1] ?? (await this.context.newPage());
    this.idOf(this.active);
    await this.active.bringToFront().catch(() => undefined);
    return this.active;
  }

  async activate(p: Page): Promise<void> {
    this.active = p;
    await p.bringToFront();
  }

  /**
   * Runs `input` on `opener` and follows the first popup it opened: the popup becomes the
   * active tab once it has left about:blank and parsed (within `ms`). Undefined when none opened.
   */
  async followPopup<T>(opener: Page, input: () => Promise<T>, ms: number): Promise<{ result: T; popup?: Page }> {
    let opened: Target | undefined;
    let arrived = (): void => undefined;
    const w = (t: Target): void => {
      if (opened || t.opener() !== opener.target()) return;
      opened = t;
      arrived();
    };
    this.openWatchers.add(w);
    // The new tab's target is told only once puppeteer has attached to it, which on a busy host
    // can come after the input was waited out (the popup was then missed: issue 40). The opener's
    // own Page.windowOpen comes with the input, so a popup known to be opening is awaited.
    const events = await pageEvents(opener).catch(() => undefined);
    let opening = false;
    const onOpen = (): void => {
      opening = true;
    };
    events?.client.on('Page.windowOpen', onOpen);
    let result: T;
    try {
      result = await input();
      if (!opened && opening) {
        await new Promise<void>((resolve) => {
          arrived = resolve;
          setTimeout(resolve, ms).unref();
        });
      }
    } finally {
      this.openWatchers.delete(w);
      events?.client.off('Page.windowOpen', onOpen);
    }
    if (!opened) return { result };
    const deadline = Date.now() + ms;
    const popup = await Promise.race([opened.page().catch(() => null), new Promise<null>((r) => setTimeout(() => r(null), ms).unref())]);
    if (!popup || popup.isClosed()) return { result };
    this.idOf(popup);
    await this.activate(popup).catch(() => undefined);
    await loaded(popup, deadline);
    return { result, popup };
  }

  /** Resolves with the next page opened by `opener`'s target, or undefined after `ms`. */
  waitPopup(opener: Page, ms: number): { promise: Promise<Page | undefined>; cancel: () => void } {
    let cancel = (): void => undefined;
    const promise = new Promise<Page | undefined>((resolve) => {
      const w = (p: Page, op: Target | undefined): void => {
        if (op === opener.target()) done(p);
      };
      const timer = setTimeout(() => done(undefined), ms);
      const done = (p: Page | undefined): void => {
        clearTimeout(timer);
        this.popupWaiters.delete(w);
        resolve(p);
      };
      cancel = () => done(undefined);
      this.popupWaiters.add(w);
    });
    return { promise, cancel };
  }
}

/** Waits, until `deadline`, for a fresh tab to leave about:blank (popups start there) and parse its document. */
export async function loaded(p: Page, deadline: number): Promise<void> {
  while (p.url() === 'about:blank' && Date.now() < deadline && !p.isClosed()) await new Promise((r) => setTimeout(r, 25));
  const left = deadline - Date.now();
  if (left > 0) await p.waitForFunction("document.readyState !== 'loading'", { timeout: left }).catch(() => undefined);
}
