// How the runner gets a browser for a run: a lease on a plane session of the
// run's compute backend, closed when the run ends.
import type { Plane } from '../plugins/contract.ts';
import type { RunRecord } from '../runs/records.ts';

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
}

export interface PlaneProvider {
  open(run: RunRecord, signal: AbortSignal): Promise<PlaneLease>;
  close(): Promise<void>;
}

export class PlaneUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PlaneUnavailable';
  }
}
