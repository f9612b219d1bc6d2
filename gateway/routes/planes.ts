// The deployment's plane agents, for operators (tokens with the `operator`
// scope): GET /v1/planes lists the remote agents with their slot holder and
// health; POST /v1/planes/{agent_id}/drain stops new runs going to one (its
// current run finishes) and /undrain takes that back. With local planes there
// is no fleet to show: the agents come and go with the gateway. Agents announce
// themselves on POST /v1/planes/register with the agent secret (http/agent-auth.ts).
import { notFound } from '../errors.ts';
import type { PlaneRegistration } from '../../schemas/types.gen.ts';
import type { Services } from '../services.ts';
import { param, type RouteSpec } from './route.ts';

const AGENT_ID = /^[0-9a-f]{12}$/;

async function listing(s: Services) {
  const fleet = s.fleet();
  return { mode: fleet ? 'remote' : s.config.planes, agents: fleet ? await fleet.status() : [] };
}

function drainRoute(on: boolean): RouteSpec {
  return {
    method: 'POST',
    path: `/v1/planes/:agent_id/${on ? 'drain' : 'undrain'}`,
    ok: 'responses.schema.json#/$defs/PlaneAgent',
    summary: on ? 'Drain a plane agent: no new runs go to it; the run it has finishes' : 'Take a drain off: the agent takes runs again',
    tags: ['planes'],
    auth: true,
    scope: 'operator',
    async handler(ctx, s) {
      const id = param(ctx, 'agent_id');
      const fleet = s.fleet();
      if (!AGENT_ID.test(id) || !fleet || !(await fleet.drain(id, on))) throw notFound(`no plane agent ${id.slice(0, 64)}`);
      ctx.body = (await fleet.status()).find((a) => a.id === id);
    },
  };
}

export const planeRoutes: RouteSpec[] = [
  {
    method: 'GET',
    path: '/v1/planes',
    ok: 'responses.schema.json#/$defs/PlaneList',
    summary: "The deployment's remote plane agents: plane, address, state (free, busy, draining, unreachable), the run holding each, health",
    tags: ['planes'],
    auth: true,
    scope: 'operator',
    async handler(ctx, s) {
      ctx.body = await listing(s);
    },
  },
  drainRoute(true),
  drainRoute(false),
  {
    method: 'POST',
    path: '/v1/planes/register',
    body: { schema: 'plane-registration.schema.json' },
    ok: 'responses.schema.json#/$defs/PlaneRegistered',
    summary: "A plane agent's heartbeat: it joins (or stays in) the fleet for ttl_seconds with its slots, labels and capabilities",
    tags: ['planes'],
    auth: 'agent',
    async handler(ctx, s) {
      const fleet = s.fleet();
      if (!fleet) throw notFound(`this gateway does not place runs on remote agents (SERVICE_PLANES=${s.config.planes}); set SERVICE_PLANES=fleet`);
      const r = ctx.state.body as PlaneRegistration;
      await fleet.registry.register(r);
      ctx.body = { agent_id: r.agent_id, ttl_seconds: r.ttl_seconds ?? 15 };
    },
  },
  {
    method: 'POST',
    path: '/v1/planes/:agent_id/deregister',
    ok: 'responses.schema.json#/$defs/PlaneRegistered',
    summary: 'A plane agent leaves the fleet at once (a clean stop); its running sessions end with it',
    tags: ['planes'],
    auth: 'agent',
    async handler(ctx, s) {
      const id = param(ctx, 'agent_id');
      const fleet = s.fleet();
      if (!AGENT_ID.test(id) || !fleet || !(await fleet.registry.deregister(id))) throw notFound(`no registered plane agent ${id.slice(0, 64)}`);
      ctx.body = { agent_id: id, ttl_seconds: 0 };
    },
  },
];
