// The run guards of the spec's Runtime block: loop_stuck (N consecutive loop
// iterations with an identical fingerprint of url, screenshot hash and visible
// text) and off_source_drift (more than off_source_step_budget consecutive
// steps outside pinned_source_url_pattern).

export class LoopStuckGuard {
  private last: string | undefined;
  private repeats = 0;
  constructor(private readonly threshold: number) {}

  /** Feeds one iteration's fingerprint; true when the run must halt. */
  observe(fingerprint: string): boolean {
    if (this.threshold <= 0) return false;
    this.repeats = fingerprint === this.last ? this.repeats + 1 : 1;
    this.last = fingerprint;
    return this.repeats >= this.threshold;
  }
}

/** `https://a.example.com` (an exact origin) or a glob where * matches any run of characters. */
export function urlMatchesPattern(url: string, pattern: string): boolean {
  if (!pattern) return true;
  if (/^[a-z][a-z0-9+.-]*:\/\/[^/*]+$/i.test(pattern)) {
    try {
      return new URL(url).origin === new URL(pattern).origin;
    } catch {
      return false;
    }
  }
  const re = new RegExp(`^${pattern.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);
  return re.test(url);
}

export class DriftGuard {
  private off = 0;
  constructor(
    private readonly pattern: string,
    private readonly budget: number,
  ) {}

  get enabled(): boolean {
    return this.pattern !== '' && this.budget > 0;
  }

  /** Feeds the URL after a step; true when the run must halt. */
  observe(url: string): boolean {
    if (!this.enabled) return false;
    this.off = urlMatchesPattern(url, this.pattern) ? 0 : this.off + 1;
    return this.off > this.budget;
  }
}
