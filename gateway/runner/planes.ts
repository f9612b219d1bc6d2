// How the runner gets a browser for a run: a lease on a plane session of the
// run's compute backend, closed when the run ends.
import type { Plane } from '../plugins/contract.ts';
import type { RunRecord } from '../runs/records.ts';
import type { ProfileHandle } from './profile-sync.ts';

/**
 * What a plane is opened for: a run, or a browser session a client drives over CDP
 * (gateway/sessions), which share this one path to the fleet. `runtime.viewport` and
 * `runtime.enable_cdp` are a session's; a run leaves them unset.
 */
export type PlaneDemand = Pick<RunRecord, 'run_id' | 'tenant_id' | 'profile_id' | 'allowed_domains' | 'runtime'> & {
  /** the profile that follows the tenant (profile-sync.ts): uploaded before init, taken back at close; absent: the agent's own dir */
  profile?: ProfileHandle;
};

export interface PlaneLease {
  plane: Plane;
  /**
   * Resolves (with the reason) when the plane goes away mid-run: the agent exited or is
   * unreachable, the session's browser or display died (a call answered 410, kind
   * 'lost'), or the agent no longer holds the session. Never resolves after close().
   */
  lost: Promise<string>;
  /** The reason `lost` resolved with (or is about to), checked synchronously after a failed step; undefined while the plane is fine and after close(). */
  isLost(): string | undefined;
  close(): Promise<void>;
  /** The session's proxy as logs and traces may show it (provider, exit, sticky session; never the password). */
  proxy?(): Record<string, unknown>;
  /**
   * Where the session lives, for a CDP relay to its browser (gateway/sessions): the agent
   * slot's URL, the agent secret and the session token. Secrets: never logged or answered.
   */
  endpoint?(): PlaneEndpoint;
  /** Moves the session to a new sticky proxy session (after a proxy failure); false when the run has no proxy. */
  rotateProxy?(): Promise<boolean>;
}

export interface PlaneEndpoint {
  url: string;
  secret: string | undefined;
  ca?: Buffer;
  token: string;
}

export interface OpenHooks {
  /** called once when the run has to wait for a plane (every slot busy) */
  waiting?: () => Promise<void> | void;
}

export interface PlaneProvider {
  open(run: PlaneDemand, signal: AbortSignal, hooks?: OpenHooks): Promise<PlaneLease>;
  close(): Promise<void>;
}

export class PlaneUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PlaneUnavailable';
  }
}
