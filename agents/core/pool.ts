// The warm pool (PLANE_WARM_POOL=N): up to N items started ahead of any session, each
// carrying no tenant state. An item is either taken (used once, destroyed on close;
// the pool makes a fresh one meanwhile) or borrowed (given back after the session,
// once it carries nothing of it, or retired: the pool makes a fresh one then).
export class WarmPool<T> {
  private readonly ready: T[] = [];
  private making = 0;
  /** borrowed items: they count against the size until given back */
  private lent = 0;
  private closed = false;
  /** borrowers waiting for an item being made or given back */
  private waiting: Array<() => void> = [];

  constructor(
    readonly size: number,
    private readonly make: () => Promise<T>,
    private readonly dispose: (item: T) => Promise<void>,
    private readonly log: (msg: string, fields?: Record<string, unknown>) => void = () => undefined,
  ) {}

  get readyCount(): number {
    return this.ready.length;
  }

  /** Items out with a session or being made ready (a given back one too): the pool is in use while any is. */
  get busyCount(): number {
    return this.lent + this.making;
  }

  /** Starts making items until `size` are ready or being made. */
  fill(): void {
    while (!this.closed && this.ready.length + this.making + this.lent < this.size) {
      this.making += 1;
      void this.make().then(
        async (item) => {
          // close() waits for `making` to reach 0: an item made too late is disposed of first
          if (this.closed) await this.dispose(item).catch(() => undefined);
          else this.ready.push(item);
          this.making -= 1;
          this.changed();
        },
        (err: unknown) => {
          this.making -= 1;
          this.changed();
          this.log('warm pool item failed to start', { err: err instanceof Error ? err.message : String(err) });
        },
      );
    }
  }

  /** A ready item (removed from the pool), or undefined; refills in the background. */
  take(): T | undefined {
    const item = this.ready.shift();
    if (item !== undefined) setImmediate(() => this.fill());
    return item;
  }

  /** A ready item that comes back through giveBack; no fresh item is made meanwhile. */
  borrow(): T | undefined {
    const item = this.ready.shift();
    if (item !== undefined) this.lent += 1;
    return item;
  }

  /**
   * A ready item, else the next one being made or given back, waited for up to `waitMs`:
   * a session that came while its browser was being renewed takes that browser, rather
   * than launching one of its own beside it. Undefined when none is coming in time.
   */
  async borrowSoon(waitMs: number): Promise<T | undefined> {
    const until = Date.now() + waitMs;
    for (;;) {
      if (this.closed) return undefined;
      const item = this.borrow();
      const left = until - Date.now();
      if (item !== undefined || this.making === 0 || left <= 0) return item;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiting.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  private changed(): void {
    const waiting = this.waiting;
    this.waiting = [];
    waiting.forEach((wake) => wake());
  }

  /** Counts an item the pool did not make as borrowed, so that the session's giveBack brings it into the pool. */
  adopt(): void {
    this.lent += 1;
  }

  /**
   * Ends a borrow: `renewed` is the item made fit for the next session, or undefined when
   * it was retired (the pool then makes a fresh one). Settles once the item is ready again.
   */
  async giveBack(renewed: Promise<T | undefined>): Promise<void> {
    this.making += 1;
    this.lent -= 1;
    const item = await renewed.catch((err: unknown) => {
      this.log('warm pool item could not be renewed', { err: err instanceof Error ? err.message : String(err) });
      return undefined;
    });
    if (item !== undefined && (this.closed || this.ready.length + this.making - 1 + this.lent >= this.size)) await this.dispose(item).catch(() => undefined);
    else if (item !== undefined) this.ready.push(item);
    this.making -= 1;
    if (item === undefined) this.fill();
    this.changed();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.changed();
    // Items still being made are disposed as they arrive (see fill).
    while (this.making > 0) await new Promise((r) => setTimeout(r, 20));
    await Promise.all(this.ready.splice(0).map((i) => this.dispose(i)));
  }
}
