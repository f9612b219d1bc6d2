// A session whose browser (or, on computer_plane, display) is gone is lost: it cannot
// come back, so every later call of the session is refused with 410 and a call in
// flight fails the same way (core.ts), instead of "succeeding" against a dead browser
// or a bare X server. The session's watchers resolve one LostSignal; a normal close
// silences them first.
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { constants } from 'node:os';
import type { Browser } from 'puppeteer-core';

export function exitText(code: number | null, signal: NodeJS.Signals | null): string {
  return signal ? `signal ${signal}` : `code ${code ?? 'unknown'}`;
}

const SIGNAL_NAMES = new Map(Object.entries(constants.signals).map(([name, n]) => [n, name as NodeJS.Signals]));

/**
 * How `pid` ended if it has died but node has not reaped it yet (a zombie): the exit
 * status from /proc/<pid>/stat (field 52, as waitpid reports it). Undefined while alive.
 */
export function zombieExit(pid: number): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return 'unknown';
  }
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  if (fields[0] !== 'Z') return undefined;
  const status = Number(fields[49]);
  if (!Number.isInteger(status)) return 'unknown';
  const sig = status & 0x7f;
  return sig ? exitText(null, SIGNAL_NAMES.get(sig) ?? (`SIG${sig}` as NodeJS.Signals)) : exitText((status >> 8) & 0xff, null);
}

export class LostSignal {
  private why: string | undefined;
  private closing = false;
  private settle!: (reason: string) => void;
  private readonly probes: (() => string | undefined)[] = [];
  private readonly listeners = new Set<(reason: string) => void>();
  /** Resolves with the reason once the session is lost; never after closing(). */
  readonly promise = new Promise<string>((resolve) => {
    this.settle = resolve;
  });

  get reason(): string | undefined {
    return this.why;
  }

  lose(reason: string): void {
    if (this.closing || this.why !== undefined) return;
    this.why = reason;
    this.settle(reason);
    for (const l of [...this.listeners]) l(reason);
    this.listeners.clear();
  }

  /** Calls `fn` once when the session is lost; returns the unsubscribe. */
  onLost(fn: (reason: string) => void): () => void {
    if (this.why !== undefined) {
      fn(this.why);
      return () => undefined;
    }
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** The session is being closed on purpose: what exits from now on is not a loss. */
  closingNow(): void {
    this.closing = true;
  }

  /** Asks the watched things directly (an exit event may still be queued); returns the reason if lost. */
  check(): string | undefined {
    for (const probe of this.probes) {
      const why = probe();
      if (why) this.lose(why);
    }
    return this.why;
  }

  /** A helper process the session cannot work without (Xvfb). */
  watchProcess(child: ChildProcess, what: string): void {
    const gone = (): string | undefined => {
      if (child.exitCode !== null || child.signalCode !== null) return `${what} exited (${exitText(child.exitCode, child.signalCode)})`;
      // Dead but not reaped yet: the exit event is still on its way.
      const z = child.pid ? zombieExit(child.pid) : undefined;
      return z ? `${what} exited (${z})` : undefined;
    };
    this.probes.push(gone);
    if (gone()) this.lose(gone() as string);
    else child.once('exit', (code, signal) => this.lose(`${what} exited (${exitText(code, signal)})`));
  }

  /** The session's browser: its process exiting or its CDP pipe closing. */
  watchBrowser(browser: Browser, what = "the session's browser"): void {
    const proc = browser.process();
    if (proc) this.watchProcess(proc, what);
    this.probes.push(() => (browser.connected ? undefined : `${what} disconnected`));
    browser.once('disconnected', () => {
      // The pipe usually closes just before the exit is reaped: give the exit (which
      // names the signal) a moment to be the reason.
      setTimeout(() => this.lose(`${what} disconnected`), 300).unref();
    });
    if (!browser.connected) this.lose(`${what} disconnected`);
  }
}
