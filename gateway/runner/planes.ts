// How the runner gets a browser for a run: a lease on a plane session of the
// run's compute backend, closed when the run ends.
import type { Plane } from '../plugins/contract.ts';
import type { RunRecord } from '../runs/records.ts';

export interface PlaneLease {
  plane: Plane;
  /** fires when the plane goes away mid-run (agent or browser died) */
  lost: Promise<string>;
  /** why the plane went away, once it has; undefined while it is alive */
  isLost?(): string | undefined;
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
