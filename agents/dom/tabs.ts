// Stable tab ids over puppeteer pages: an id is given once per page and never reused,
// so a client can hold it across calls. The active tab is the one brought to front last.
// The tabs are those of the session's browser context only (a reused browser may hold others).
import type { BrowserContext, Page, Target } from 'puppeteer-core';
import { notFound } from '../core/errors.ts';

export class Tabs {
  private readonly ids = new Map<Page, string>();
  private next = 1;
  active: Page | undefined;
  /** Pages seen opening, by opener page, for catching popups. */
  private readonly popupWaiters = new Set<(p: Page, opener: Target | undefined) => void>();

  constructor(private readonly context: BrowserContext) {
    context.on('targetcreated', (t: Target) => {
      if (t.type() !== 'page') return;
      void t.page().then((p) => {
        if (!p) return;
        this.idOf(p);
        for (const w of this.popupWaiters) w(p, t.opener());
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
      p.once('close', () => {
        if (this.active === p) this.active = undefined;
      });
    }
    return id;
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
