// SERVICE_PLANES=none: the gateway runs no browsers; every run fails at start
// with halt class plane_unavailable (useful for an edge-only deployment).
import { PlaneUnavailable, type PlaneLease, type PlaneProvider } from './planes.ts';

export class NoPlanes implements PlaneProvider {
  async open(): Promise<PlaneLease> {
    throw new PlaneUnavailable('this gateway runs no compute planes (SERVICE_PLANES=none)');
  }
  async close(): Promise<void> {}
}
