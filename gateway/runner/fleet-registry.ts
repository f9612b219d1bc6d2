// Who is in the fleet: the agents named in SERVICE_PLANES (static, one slot each)
// and the agents that announced themselves (POST /v1/planes/register, kept in the
// shared store as `plane-agent:<id>` for their ttl). Every replica reads the same
// entries, so a registration taken by one replica places runs from all of them.
import { createHash } from 'node:crypto';
import type { Backend } from '../plugins/contract.ts';
import type { AtomicOps } from '../state/atomic.ts';
import type { PlaneRegistration } from '../../schemas/types.gen.ts';

export interface FleetAgent {
  /** stable id: 12 hex digits (sha256 of a static agent's URL; a registered agent's own) */
  id: string;
  backend: Backend;
  /** one URL per session slot */
  slots: string[];
  labels: Record<string, string>;
  source: 'static' | 'registered';
  version: string;
  /** sessions bound as the agent last said (registered agents only) */
  reportedBusy: number | null;
}

export const agentId = (url: string): string => createHash('sha256').update(url).digest('hex').slice(0, 12);
export const REGISTRY_PREFIX = 'plane-agent:';
/** How long one read of the registry serves placement (registrations beat every few seconds). */
const CACHE_MS = 1000;

export function parseRemotePlanes(spec: string): FleetAgent[] {
  // `fleet`: no static agent; every agent registers itself
  if (spec.trim() === 'fleet') return [];
  const out: FleetAgent[] = [];
  for (const part of spec.split(',').map((s) => s.trim()).filter(Boolean)) {
    const [name, url] = part.split('=', 2) as [string, string | undefined];
    if ((name !== 'dom_plane' && name !== 'computer_plane') || !url || !/^(grpcs?|https?):\/\//.test(url)) {
      throw new Error(`SERVICE_PLANES: expected local, none, fleet or dom_plane=grpc(s)://host:port,computer_plane=... (a plane may be named more than once), got ${JSON.stringify(part)}`);
    }
    if (out.some((a) => a.slots[0] === url)) throw new Error(`SERVICE_PLANES: ${url} is named twice`);
    out.push({ id: agentId(url), backend: name, slots: [url], labels: {}, source: 'static', version: '', reportedBusy: null });
  }
  return out;
}

export class FleetRegistry {
  private cache: { at: number; agents: FleetAgent[] } | undefined;

  constructor(
    readonly staticAgents: FleetAgent[],
    private readonly atomic: AtomicOps,
  ) {}

  /** Static agents and live registrations (a registration under a static agent's id replaces it). */
  async agents(fresh = false): Promise<FleetAgent[]> {
    const now = Date.now();
    if (!fresh && this.cache && now - this.cache.at < CACHE_MS) return this.cache.agents;
    const registered = (await this.atomic.list(REGISTRY_PREFIX)).flatMap(({ value }) => {
      try {
        const r = JSON.parse(value) as PlaneRegistration;
        return [{ id: r.agent_id, backend: r.plane, slots: r.slots, labels: r.labels ?? {}, source: 'registered' as const, version: r.version ?? '', reportedBusy: r.busy ?? 0 }];
      } catch {
        return [];
      }
    });
    const ids = new Set(registered.map((a) => a.id));
    const agents = [...this.staticAgents.filter((a) => !ids.has(a.id)), ...registered];
    this.cache = { at: now, agents };
    return agents;
  }

  /** Takes (or refreshes) an agent's registration for ttl seconds. */
  async register(r: PlaneRegistration): Promise<void> {
    await this.atomic.put(REGISTRY_PREFIX + r.agent_id, JSON.stringify(r), (r.ttl_seconds ?? 15) * 1000);
    this.cache = undefined;
  }

  /** Drops a registration at once (a clean agent stop); false when there was none. */
  async deregister(id: string): Promise<boolean> {
    const held = await this.atomic.get(REGISTRY_PREFIX + id);
    if (held === null) return false;
    this.cache = undefined;
    return this.atomic.deleteIf(REGISTRY_PREFIX + id, held);
  }
}

/** True when the agent carries every label the run asks for. */
export function labelsMatch(agent: FleetAgent, wanted: Record<string, string> | undefined): boolean {
  return Object.entries(wanted ?? {}).every(([k, v]) => agent.labels[k] === v);
}
