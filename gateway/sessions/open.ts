// What a session asks of the fleet: the same plane demand a run makes, with the
// session's own viewport and raw CDP enabled, opened within the session's wait.
import type { Tenant } from '../http/tenants.ts';
import type { PlaneDemand, PlaneLease, PlaneProvider } from '../runner/planes.ts';
import type { Backend } from '../plugins/contract.ts';
import type { SessionOptions, SessionRecord } from './records.ts';

export interface SessionSpec extends SessionOptions {
  compute_backend: Backend;
  profile_id: string | undefined;
  viewport: [number, number] | undefined;
  /** proxy and placement fields, as a run's runtime has them */
  runtime: Record<string, unknown>;
}

export function sessionDemand(tenant: Tenant, record: SessionRecord, spec: SessionSpec): PlaneDemand {
  return {
    run_id: record.session_id,
    tenant_id: tenant.tenant_id,
    profile_id: record.profile_id,
    allowed_domains: [...tenant.allowed_domains],
    runtime: {
      max_cost: 0,
      max_time_minutes: spec.timeout_seconds / 60,
      ...spec.runtime,
      proxy_provider: String(spec.runtime.proxy_provider ?? ''),
      compute_backend: spec.compute_backend,
      enable_cdp: true,
      ...(spec.viewport ? { viewport: spec.viewport } : {}),
    },
  };
}

/** The plane for `demand`, or the provider's refusal; aborted after `openMs`. */
export async function openPlane(planes: PlaneProvider, demand: PlaneDemand, openMs: number): Promise<PlaneLease> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), openMs);
  try {
    return await planes.open(demand, ac.signal);
  } finally {
    clearTimeout(timer);
  }
}
