// A session outlives the replica that opened it. When that replica dies (SIGKILL, a lost
// host), its browser is still up on the agent and the CDP clients another replica relays
// are still connected: the replica that notices first takes the session over rather than
// ending it. It claims the owner lease (the shared store decides between replicas that
// notice at once), asks the agent whether it still holds the session, and from then on
// watches it as the owner did. A session whose agent no longer holds it is not adopted:
// it ends gateway_lost, as before.
import type { AtomicOps } from '../state/atomic.ts';
import { ownerIsDead } from '../runs/owners.ts';
import { connectPlane, type PlaneHealth } from '../planes/index.ts';
import type { PlaneEndpoint, PlaneLease } from '../runner/planes.ts';
import type { SessionRecord } from './records.ts';

/** What an owner needs of a session's plane: its end, its loss, where a relay reaches it. */
export type HeldPlane = Pick<PlaneLease, 'close' | 'lost' | 'endpoint'>;

export const ownerKey = (id: string): string => `session-owner:${id}`;

export type Adoption =
  /** this replica owns the session now, through `plane` */
  | { kind: 'adopted'; plane: HeldPlane }
  /** another replica took it first (or the owner is back): nothing to do here */
  | { kind: 'taken' }
  /** nobody can own it any more: its plane is gone */
  | { kind: 'gone'; why: string };

export interface AdoptDeps {
  atomic: AtomicOps;
  owner: string;
  leaseMs: number;
  fleet: { secret: string | undefined; ca?: Buffer };
}

/** Tries to take over `r`, whose owner is gone. The owner lease is held on 'adopted' only. */
export async function adopt(r: SessionRecord, d: AdoptDeps): Promise<Adoption> {
  if (!r.endpoint) return { kind: 'gone', why: 'the session had no plane yet' };
  const key = ownerKey(r.session_id);
  // a dead owner on this host may still hold the lease until it expires
  if (ownerIsDead(r.owner)) await d.atomic.deleteIf(key, r.owner).catch(() => false);
  const holder = await d.atomic.claim(key, d.owner, d.leaseMs);
  if (holder !== null) return { kind: 'taken' };
  const ep: PlaneEndpoint = { url: r.endpoint.url, token: r.endpoint.token, secret: d.fleet.secret, ...(d.fleet.ca ? { ca: d.fleet.ca } : {}) };
  const plane = connectPlane({ url: ep.url, secret: ep.secret, ca: ep.ca, deadlineMs: 15_000, retries: 0 });
  plane.token = ep.token;
  let health: PlaneHealth | undefined;
  try {
    health = (await plane.call('health', 'GET', {}, { deadlineMs: 5000 })).body as unknown as PlaneHealth;
  } catch {
    health = undefined;
  }
  const why = !health
    ? 'its plane agent does not answer'
    : typeof health.session_lost === 'string'
      ? `its browser is gone: ${health.session_lost}`
      : !health.session_bound || health.run_id !== r.session_id
        ? 'its plane agent no longer holds it'
        : undefined;
  if (why) {
    plane.disconnect();
    await d.atomic.deleteIf(key, d.owner).catch(() => false);
    return { kind: 'gone', why };
  }
  // the agent's orphan reaper counts the watch's probes (they show the session's token)
  plane.watch();
  return {
    kind: 'adopted',
    plane: {
      lost: plane.lost,
      endpoint: () => ep,
      close: async () => {
        plane.stopWatch();
        try {
          await plane.close();
        } finally {
          plane.disconnect();
        }
      },
    },
  };
}
