// The CDP clients a replica relays to sessions, by session. The owner counts them for
// its idle and keep-alive rules; a replica that relays to a session it does not own
// tells the owner a client is here through the shared store (renewed while attached).
import type { AtomicOps } from '../state/atomic.ts';

/** renewed by a replica relaying to a session it does not own, so the owner knows a client is there */
export const attachedKey = (id: string): string => `session-attached:${id}`;
export const ATTACHED_TTL_MS = 5000;

export class SessionClients {
  /** each relay's close, by session: called when the session ends first */
  private readonly relays = new Map<string, Set<(why: string) => void>>();

  constructor(private readonly atomic: AtomicOps) {}

  /**
   * Adds a relay of `id`; returns its detach, which answers how many are left. `beat`
   * (a replica that does not own the session) runs every third of ATTACHED_TTL_MS while
   * the relay lasts, after the attached mark is renewed.
   */
  add(id: string, close: (why: string) => void, beat?: () => void): () => number {
    const set = this.relays.get(id) ?? new Set();
    this.relays.set(id, set);
    set.add(close);
    const mark = (): void => void this.atomic.put(attachedKey(id), '1', ATTACHED_TTL_MS).catch(() => undefined);
    const timer = beat
      ? setInterval(() => {
          mark();
          beat();
        }, ATTACHED_TTL_MS / 3)
      : undefined;
    timer?.unref();
    if (beat) mark();
    let left: number | undefined;
    return () => {
      if (left !== undefined) return left;
      if (timer) clearInterval(timer);
      set.delete(close);
      left = set.size;
      if (left === 0) this.relays.delete(id);
      return left;
    };
  }

  /** A client is attached here, or (through another replica) its mark is fresh. */
  async attached(id: string): Promise<boolean> {
    if ((this.relays.get(id)?.size ?? 0) > 0) return true;
    return (await this.atomic.get(attachedKey(id)).catch(() => null)) !== null;
  }

  closeAll(id: string, why: string): void {
    for (const close of [...(this.relays.get(id) ?? [])]) close(why);
  }
}
