// A session's trace, read back like a run's: the owner records a step whenever the
// session's page changed since the last look (the navigations and inputs the agent's
// CDP relay saw, or a new URL), with the screenshot after it, looking at most every
// SAMPLE_MS while a client is attached; the recording closes after the session's end.
// Nothing here may end the session: a look that fails is skipped. The end takes one last
// look, begun as the end begins and bounded by LAST_LOOK_MS, so a session shorter than a
// sample (a script that connects, acts and releases within a second) still has its steps
// while a release waits at most that long for the plane's screenshot.
import { createHash } from 'node:crypto';
import type { Plane } from '../plugins/contract.ts';
import type { RecordedStep, RunRecording } from '../runner/recording.ts';

export interface CdpActivity {
  navigations: string[];
  inputs: number;
  commands: number;
}

export interface SessionTraceDeps {
  recording: RunRecording;
  plane: Plane;
  /** what the CDP clients did since the last call (the agent's `cdp/activity` op) */
  activity(): Promise<CdpActivity>;
  /** how often the page is looked at while a client is attached (default SAMPLE_MS) */
  sampleMs?: number;
}

export const SAMPLE_MS = 1000;
/** the most the end waits for its last look */
export const LAST_LOOK_MS = 750;

export class SessionTrace {
  private index = 0;
  private lastUrl = '';
  private lastShot = '';
  private lastLook = 0;
  private looking: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly d: SessionTraceDeps) {}

  /** The owner's tick: looks at the page when a client is there and the last look is old enough. */
  tick(clientAttached: boolean): void {
    if (this.closed || this.looking || !clientAttached || Date.now() - this.lastLook < (this.d.sampleMs ?? SAMPLE_MS)) return;
    this.looking = this.look().finally(() => (this.looking = undefined));
  }

  private async look(): Promise<void> {
    this.lastLook = Date.now();
    const started = new Date().toISOString();
    try {
      const [act, page] = await Promise.all([this.d.activity().catch(() => undefined), this.page()]);
      const moved = act !== undefined && (act.navigations.length > 0 || act.inputs > 0);
      if (!moved && page.url === this.lastUrl) return;
      const shot = this.d.recording.wantsScreenshots ? await this.d.plane.screenshot('png').catch(() => undefined) : undefined;
      const hash = shot ? createHash('sha1').update(shot.image).digest('hex') : '';
      // inputs that changed nothing on the screen or the URL make no step
      if (!act?.navigations.length && page.url === this.lastUrl && hash !== '' && hash === this.lastShot) return;
      this.lastUrl = page.url;
      this.lastShot = hash;
      const step: RecordedStep = {
        index: this.index++,
        path: `session[${this.index - 1}]`,
        type: 'cdp',
        intent: describe(act, page.url),
        success: true,
        final_url: page.url,
        page_title: page.title,
        ...(act ? { action: { type: 'CDP', params: { navigations: act.navigations, inputs: act.inputs, commands: act.commands } } } : {}),
        attempts: 1,
        started_at: started,
        ended_at: new Date().toISOString(),
        cost_usd: 0,
      };
      await this.d.recording.step(step, shot ? { post: shot.image } : {});
    } catch {
      // a look that failed (the page was navigating, the agent was busy) is tried at the next tick
    }
  }

  private async page(): Promise<{ url: string; title: string }> {
    const p = this.d.plane;
    if (p.dom) {
      const url = await p.dom.currentUrl().catch(() => '');
      const title = await p.dom.evaluate<string>('document.title').catch(() => '');
      return { url, title: typeof title === 'string' ? title : '' };
    }
    const f = await p.facts?.().catch(() => null);
    return { url: f?.url ?? '', title: f?.title ?? '' };
  }

  /**
   * The end's look: what changed since the last sample (a look under way is waited for
   * instead), then no more looks. Resolves within LAST_LOOK_MS whatever the plane does.
   */
  last(): Promise<void> {
    if (this.closed) return Promise.resolve();
    const look = this.looking ?? this.look();
    this.closed = true;
    let timer: NodeJS.Timeout | undefined;
    const cap = new Promise<void>((resolve) => (timer = setTimeout(resolve, LAST_LOOK_MS)));
    return Promise.race([look, cap]).finally(() => clearTimeout(timer));
  }

  /** Ends the recording with the session's end (after its plane closed: no more looks). */
  async close(endReason: string, detail: string): Promise<void> {
    this.closed = true;
    await this.looking;
    const ok = ['released', 'client_disconnected', 'idle_timeout', 'max_duration'].includes(endReason);
    await this.d.recording.close({ status: ok ? 'succeeded' : 'failed', halt_class: ok ? null : endReason, summary: `session ended: ${endReason} (${detail})`, cost_usd: 0 });
  }
}

function describe(act: CdpActivity | undefined, url: string): string {
  const parts: string[] = [];
  for (const n of act?.navigations ?? []) parts.push(`navigate ${n}`);
  if (act?.inputs) parts.push(`${act.inputs} input${act.inputs === 1 ? '' : 's'}`);
  return parts.length > 0 ? `${parts.join('; ')} (now at ${url || 'an unknown page'})` : `the page is now ${url || 'unknown'}`;
}
