// Remote plane agents: named in SERVICE_PLANES (`dom_plane=grpcs://a:7443,...`,
// one session slot each) or announced by the agents themselves (PLANE_REGISTER_URL:
// several slots per agent, labels; fleet-registry.ts). A run is placed on a free
// slot of a healthy, undrained agent of its plane (with the labels it asks for),
// the least loaded agent first, by claiming the slot in the shared store
// (`plane-slot:<agent id>:<slot>`), so two replicas never place two runs on one
// slot. The claim is renewed while the session lives and released when it
// closes; a replica that dies stops renewing, and the slot is free again within
// SERVICE_RUN_LEASE_SECONDS. With every slot busy a run waits, its status
// `queued` (phase waiting_for_plane), in order of arrival on this replica, up to
// SERVICE_PLANE_WAIT_SECONDS; it fails plane_unavailable only after that, or at
// once when its plane has no agent at all.
import { readFileSync } from 'node:fs';
import { sleep } from '../../shared/abort.ts';
import { connectPlane, probePlane } from '../planes/index.ts';
import type { Backend } from '../plugins/contract.ts';
import type { Logger } from '../log.ts';
import type { AtomicOps } from '../state/atomic.ts';
import { MemoryAtomicOps } from '../state/atomic.ts';
import { lease } from './agent-planes.ts';
import { FleetRegistry, agentId, labelsMatch, type FleetAgent } from './fleet-registry.ts';
import { PlaneUnavailable, type OpenHooks, type PlaneDemand, type PlaneLease, type PlaneProvider } from './planes.ts';
import { servedLately, type ProxyProviders } from './proxies.ts';
import type { Metrics } from '../metrics.ts';

export { parseRemotePlanes, type FleetAgent } from './fleet-registry.ts';

export interface FleetOptions {
  secret?: string;
  /** PEM trusted for grpcs:// and https:// agents; default the file named by SERVICE_PLANE_CA */
  ca?: Buffer | string;
  /** the shared store the slot claims and registrations live in; default one in this process (a single replica) */
  atomic?: AtomicOps;
  /** how long a slot claim lasts between renewals (the run lease) */
  leaseMs?: number;
  /** how long a run waits for a free slot before plane_unavailable */
  waitMs?: number;
  proxies?: ProxyProviders;
  /** the deadline of one plane call (SERVICE_PLANE_CALL_SECONDS, default 30) */
  callMs?: number;
  log?: Logger;
  metrics?: Metrics;
}

export interface SlotStatus {
  index: number;
  address: string;
  run_id: string | null;
  reachable: boolean;
  session_bound: boolean;
}

/** An agent as GET /v1/planes shows it. */
export interface AgentStatus {
  id: string;
  plane: Backend;
  /** the first slot's host:port only: a URL may carry credentials */
  address: string;
  state: 'free' | 'busy' | 'draining' | 'unreachable';
  /** the run holding its first busy slot */
  run_id: string | null;
  draining: boolean;
  reachable: boolean;
  session_bound: boolean;
  source: 'static' | 'registered';
  capacity: number;
  busy: number;
  labels: Record<string, string>;
  version: string;
  slots: SlotStatus[];
}

/** A slot that refused a session or could not be reached is skipped this long. */
const COOL_DOWN_MS = 5000;
const POLL_MS = 250;
/** Agents that just left (a late heartbeat, a restart) are waited for this long before a run fails for want of any. */
const ABSENT_GRACE_MS = 30_000;
/** A drain mark outlives any upgrade; an operator takes it off. */
const DRAIN_TTL_MS = 365 * 24 * 3600 * 1000;
const slotKey = (a: FleetAgent, i: number) => `plane-slot:${a.id}:${i}`;
/** Agents whose latest exits are remembered (registered ids come and go). */
const SERVED_AGENTS_KEPT = 1024;

export class RemoteAgentPlanes implements PlaneProvider {
  readonly registry: FleetRegistry;
  /** SERVICE_PLANE_CA: what a grpcs:// agent's certificate is checked against (a CDP relay on any replica uses it too) */
  readonly ca: Buffer | undefined;
  private readonly atomic: AtomicOps;
  private readonly leaseMs: number;
  private readonly waitMs: number;
  private readonly coolUntil = new Map<string, number>();
  /** runs waiting on this replica, by plane and labels, in order of arrival */
  private readonly waiting = new Map<string, string[]>();
  /** when an agent for each plane and labels was last seen in the fleet */
  private readonly lastFit = new Map<string, number>();
  /** the proxy exits each agent's latest sessions placed by this replica went out through (ProxyProviders.affinityFor), latest last */
  private readonly served = new Map<string, string[]>();
  private closed = false;

  constructor(agents: FleetAgent[] | Partial<Record<Backend, string>>, private readonly o: FleetOptions = {}) {
    const list = Array.isArray(agents)
      ? agents
      : Object.entries(agents).map(([backend, url]): FleetAgent => ({ id: agentId(url!), backend: backend as Backend, slots: [url!], labels: {}, source: 'static', version: '', reportedBusy: null }));
    const ca = o.ca ?? process.env.SERVICE_PLANE_CA;
    this.ca = typeof ca === 'string' && ca !== '' ? readFileSync(ca) : Buffer.isBuffer(ca) ? ca : undefined;
    this.atomic = o.atomic ?? new MemoryAtomicOps();
    this.registry = new FleetRegistry(list, this.atomic);
    this.leaseMs = o.leaseMs ?? 30_000;
    this.waitMs = o.waitMs ?? 120_000;
  }

  async open(run: PlaneDemand, signal?: AbortSignal, hooks?: OpenHooks): Promise<PlaneLease> {
    const backend = run.runtime.compute_backend;
    const labels = (run.runtime.plane_labels ?? undefined) as Record<string, string> | undefined;
    const queueKey = `${backend} ${JSON.stringify(labels ?? {})}`;
    const affinity = this.o.proxies?.affinityFor(run) ?? '';
    const queue = this.waiting.get(queueKey) ?? [];
    this.waiting.set(queueKey, queue);
    queue.push(run.run_id);
    const deadline = Date.now() + this.waitMs;
    let last = '';
    let told = false;
    try {
      for (;;) {
        if (this.closed) throw new PlaneUnavailable('the gateway is shutting down');
        if (signal?.aborted) throw new PlaneUnavailable('the run was stopped while it waited for a plane');
        const mine = (await this.registry.agents()).filter((a) => a.backend === backend);
        const fit = mine.filter((a) => labelsMatch(a, labels));
        if (fit.length > 0) this.lastFit.set(queueKey, Date.now());
        // none at all fails at once, unless some were here a moment ago: a heartbeat late on a loaded host, an agent restarting
        else if (Date.now() - (this.lastFit.get(queueKey) ?? -Infinity) > ABSENT_GRACE_MS) {
          throw new PlaneUnavailable(mine.length === 0 ? `no ${backend} agent is configured in SERVICE_PLANES or registered` : `no ${backend} agent has the labels ${JSON.stringify(labels)}`);
        }
        const free = await this.freeSlots(fit, affinity);
        // the first runs in line take the free slots: a run tries only while fewer runs wait ahead of it than slots are free
        const ahead = queue.indexOf(run.run_id);
        for (const { agent, slots } of ahead < free.reduce((n, f) => n + f.slots.length, 0) ? free : []) {
          for (const i of slots) {
            const key = slotKey(agent, i);
            if ((await this.atomic.claim(key, run.run_id, this.leaseMs)) !== null) continue;
            try {
              const placed = await this.place(agent, i, key, run);
              if (affinity) this.remember(agent.id, affinity);
              return placed;
            } catch (err) {
              await this.atomic.deleteIf(key, run.run_id).catch(() => undefined);
              this.coolUntil.set(`${agent.id}:${i}`, Date.now() + COOL_DOWN_MS);
              this.o.metrics?.planePlacement(agent.id, 'refused');
              last = `${new URL(agent.slots[i]!).host}: ${(err as Error).message}`;
              this.o.log?.warn({ run_id: run.run_id, agent: agent.id, slot: i, err: (err as Error).message }, 'plane agent refused a session; trying another');
            }
          }
        }
        if (Date.now() >= deadline) throw new PlaneUnavailable(`no ${backend} agent had a free slot within ${Math.round(this.waitMs / 1000)} s${last ? ` (last refusal: ${last})` : ''}`);
        if (!told) {
          told = true;
          await hooks?.waiting?.();
        }
        await sleep(POLL_MS, signal).catch(() => undefined);
      }
    } finally {
      queue.splice(queue.indexOf(run.run_id), 1);
      if (queue.length === 0) this.waiting.delete(queueKey);
    }
  }

  /** Notes that `agentId` served `affinity` last; agents that come and go (registered ids) are forgotten oldest first. */
  private remember(agentId: string, affinity: string): void {
    const list = servedLately(this.served.get(agentId), affinity);
    this.served.delete(agentId);
    this.served.set(agentId, list);
    if (this.served.size > SERVED_AGENTS_KEPT) this.served.delete(this.served.keys().next().value!);
  }

  /**
   * The free slots of each undrained agent: first those that served `affinity` (the run's
   * proxy exit) lately, since a browser of that geo may be warm there (a cold one costs
   * seconds, more than a busier agent does), then the least loaded (free share of its
   * capacity, then free count; ties in a shuffled order so runs spread).
   */
  private async freeSlots(agents: FleetAgent[], affinity = ''): Promise<Array<{ agent: FleetAgent; slots: number[] }>> {
    const now = Date.now();
    const rows = await Promise.all(
      agents.map(async (agent) => {
        if (await this.atomic.get(`plane-drain:${agent.id}`)) return { agent, slots: [] as number[], share: 0, tie: 0 };
        const held = await Promise.all(agent.slots.map((_, i) => this.atomic.get(slotKey(agent, i))));
        const slots = held.flatMap((h, i) => (h === null && (this.coolUntil.get(`${agent.id}:${i}`) ?? 0) <= now ? [i] : []));
        return { agent, slots, share: slots.length / agent.slots.length, tie: Math.random() };
      }),
    );
    const near = (a: FleetAgent): number => (affinity && this.served.get(a.id)?.includes(affinity) ? 1 : 0);
    return rows.filter((r) => r.slots.length > 0).sort((a, b) => near(b.agent) - near(a.agent) || b.share - a.share || b.slots.length - a.slots.length || a.tie - b.tie);
  }

  /** A session on slot `i` of agent `a`, which this run holds; the claim is renewed while the session lives. */
  private async place(a: FleetAgent, i: number, key: string, run: PlaneDemand): Promise<PlaneLease> {
    const renew = setInterval(() => {
      void this.atomic.renew(key, run.run_id, this.leaseMs).then(
        (held) => held || this.o.log?.warn({ run_id: run.run_id, agent: a.id, slot: i }, 'plane slot claim lapsed while the session lives'),
        () => undefined,
      );
    }, Math.max(1000, Math.floor(this.leaseMs / 3)));
    renew.unref();
    const t0 = performance.now();
    this.o.metrics?.planeBusy(a.id, true);
    const release = async () => {
      clearInterval(renew);
      this.o.metrics?.planeBusy(a.id, false);
      await this.atomic.deleteIf(key, run.run_id).catch(() => undefined);
    };
    try {
      const session = connectPlane({ url: a.slots[i]!, secret: this.o.secret, ca: this.ca, deadlineMs: this.o.callMs });
      const l = await lease(session, run, run.runtime.compute_backend, undefined, release, undefined, this.o.log, this.o.proxies);
      l.endpoint = () => ({ url: a.slots[i]!, secret: this.o.secret, ca: this.ca, token: session.token ?? '' });
      this.o.log?.info({ run_id: run.run_id, agent: a.id, slot: i, url: a.slots[i] }, 'run placed on a plane agent');
      this.o.metrics?.planePlacement(a.id, 'placed', (performance.now() - t0) / 1000);
      return l;
    } catch (err) {
      clearInterval(renew);
      this.o.metrics?.planeBusy(a.id, false);
      throw err;
    }
  }

  /** Every agent with its slots' holders, drain mark and health (one short health call per slot). */
  async status(): Promise<AgentStatus[]> {
    const agents = await this.registry.agents(true);
    return Promise.all(
      agents.map(async (a) => {
        const drain = await this.atomic.get(`plane-drain:${a.id}`);
        const slots = await Promise.all(
          a.slots.map(async (url, index): Promise<SlotStatus> => {
            const [holder, health] = await Promise.all([
              this.atomic.get(slotKey(a, index)),
              probePlane({ url, secret: this.o.secret, ca: this.ca }, 1500).catch(() => undefined),
            ]);
            return { index, address: new URL(url).host, run_id: holder, reachable: health !== undefined && health.ok !== false, session_bound: health?.session_bound === true };
          }),
        );
        const busy = slots.filter((sl) => sl.run_id !== null).length;
        const reachable = slots.some((sl) => sl.reachable);
        const state = !reachable ? 'unreachable' : busy === slots.length ? 'busy' : drain ? 'draining' : 'free';
        const holder = slots.find((sl) => sl.run_id !== null)?.run_id ?? null;
        return {
          id: a.id,
          plane: a.backend,
          address: slots[0]!.address,
          state,
          run_id: holder,
          draining: drain !== null,
          reachable,
          session_bound: slots.some((sl) => sl.session_bound),
          source: a.source,
          capacity: slots.length,
          busy,
          labels: a.labels,
          version: a.version,
          slots,
        };
      }),
    );
  }

  /** Marks an agent drained (no new runs; the ones it has finish) or takes the mark off; false for an unknown id. */
  async drain(id: string, on: boolean): Promise<boolean> {
    if (!(await this.registry.agents(true)).some((a) => a.id === id)) return false;
    if (on) await this.atomic.put(`plane-drain:${id}`, 'drained', DRAIN_TTL_MS);
    else await this.atomic.deleteIf(`plane-drain:${id}`, 'drained');
    return true;
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}
