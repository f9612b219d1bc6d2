// What a session's CDP clients did to its pages, for the session's trace: the
// navigations they asked for and how many inputs they sent, since the gateway last
// asked (the `cdp/activity` op). The relay (cdp-relay.ts) tells it every command that
// passed its filter; reading the parameters it needs costs nothing more than the
// filter's own parse. Mouse moves are not inputs here: they change nothing.
import type { OpSpec } from './types.ts';

const MAX_NAVIGATIONS = 20;

export interface CdpActivityReport {
  /** urls of Page.navigate and Target.createTarget, oldest first (at most 20) */
  navigations: string[];
  /** Input.* commands that press, type, scroll or touch */
  inputs: number;
  /** every command that went through */
  commands: number;
}

export class CdpActivity {
  private r: CdpActivityReport = { navigations: [], inputs: 0, commands: 0 };

  note(method: string, params: Record<string, unknown>): void {
    this.r.commands++;
    if ((method === 'Page.navigate' || method === 'Target.createTarget') && typeof params.url === 'string' && params.url !== '' && params.url !== 'about:blank') {
      if (this.r.navigations.length < MAX_NAVIGATIONS) this.r.navigations.push(params.url.slice(0, 2048));
    } else if (method.startsWith('Input.') && !(method === 'Input.dispatchMouseEvent' && params.type === 'mouseMoved')) {
      this.r.inputs++;
    }
  }

  /** What happened since the last call. */
  take(): CdpActivityReport {
    const out = this.r;
    this.r = { navigations: [], inputs: 0, commands: 0 };
    return out;
  }
}

export const CDP_ACTIVITY_ROUTES = { 'cdp/activity': 'GET' } as const;

export function cdpActivityOps(activity: CdpActivity): Record<keyof typeof CDP_ACTIVITY_ROUTES, OpSpec> {
  return { 'cdp/activity': { http: 'GET', idempotent: false, run: async () => ({ body: { ...activity.take() } }) } };
}
