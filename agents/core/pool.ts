// The warm pool (PLANE_WARM_POOL=N): up to N items started ahead of any session, each
// carrying no tenant state. An item is handed out once and never comes back: what a
// session used is destroyed on close, and the pool makes a fresh item instead.
export class WarmPool<T> {
  private readonly ready: T[] = [];
  private making = 0;
  private closed = false;

  constructor(
    private readonly size: number,
    private readonly make: () => Promise<T>,
    private readonly dispose: (item: T) => Promise<void>,
    private readonly log: (msg: string, fields?: Record<string, unknown>) => void = () => undefined,
  ) {}

  get readyCount(): number {
    return this.ready.length;
  }

  /** Starts making items until `size` are ready or being made. */
  fill(): void {
    while (!this.closed && this.ready.length + this.making < this.size) {
      this.making += 1;
      void this.make().then(
        async (item) => {
          this.making -= 1;
          if (this.closed) await this.dispose(item);
          else this.ready.push(item);
        },
        (err: unknown) => {
          this.making -= 1;
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

  async close(): Promise<void> {
    this.closed = true;
    // Items still being made are disposed as they arrive (see fill).
    while (this.making > 0) await new Promise((r) => setTimeout(r, 20));
    await Promise.all(this.ready.splice(0).map((i) => this.dispose(i)));
  }
}
