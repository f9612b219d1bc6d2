// What a session asks of the fleet: the same plane demand a run makes, with the
// session's own viewport and raw CDP enabled, opened within the session's wait.
import type { Tenant } from '../http/tenants.ts';
import { waitWhileSaving, type AtomicOps } from '../state/atomic.ts';
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

/** A session's row before its plane opens: `starting`, owned by `owner`, expiring timeout_seconds from now. */
export function startingRecord(id: string, tenantId: string, spec: SessionSpec, owner: string): SessionRecord {
  const now = Date.now();
  return {
    session_id: id,
    tenant_id: tenantId,
    status: 'starting',
    compute_backend: spec.compute_backend,
    created_at: new Date(now).toISOString(),
    updated_at: new Date(now).toISOString(),
    expires_at: new Date(now + spec.timeout_seconds * 1000).toISOString(),
    ended_at: null,
    end_reason: null,
    detail: null,
    idle_timeout_seconds: spec.idle_timeout_seconds,
    timeout_seconds: spec.timeout_seconds,
    keep_alive: spec.keep_alive,
    profile_id: spec.profile_id ? `${tenantId}/${spec.profile_id}` : null,
    owner,
    endpoint: null,
    video: false,
  };
}

/**
 * The profile lock `key` for session `id`: null once held, else who holds it. A holder that
 * is saving is waited for; one that has ended (`ended`) gives way.
 */
export async function claimProfile(atomic: AtomicOps, key: string, id: string, ttlMs: number, ended: (holder: string) => Promise<boolean>): Promise<string | null> {
  let holder = await atomic.claim(key, id, ttlMs);
  if (holder !== null && (await waitWhileSaving(atomic, holder))) holder = await atomic.claim(key, id, ttlMs);
  if (holder !== null && (await ended(holder)) && (await atomic.deleteIf(key, holder))) holder = await atomic.claim(key, id, ttlMs);
  return holder;
}
