// /v1/profiles: the tenant's stored browser profiles (gateway/vault/profiles.ts).
// Only the index is shown: a profile's contents (cookies, storage) never leave
// the store but into the tenant's next browser. Reads need the status scope,
// the delete the run scope, as credentials' routes do.
import type { Ctx } from '../context.ts';
import { param, type RouteSpec } from './route.ts';

const idParam = (ctx: Ctx): string => param(ctx, 'id');

export const profileRoutes: RouteSpec[] = [
  {
    method: 'GET',
    path: '/v1/profiles',
    ok: 'profiles.schema.json#/$defs/ProfileList',
    summary: "List the tenant's stored browser profiles (version, sizes, sha256, times, last run); never their contents",
    tags: ['profiles'],
    auth: true,
    scope: 'status',
    async handler(ctx, s) {
      ctx.body = { profiles: await s.profiles.list(ctx.state.tenant!.tenant_id) };
    },
  },
  {
    method: 'GET',
    path: '/v1/profiles/:id',
    ok: 'profiles.schema.json',
    summary: 'A stored profile by id: its newest version, sizes, sha256, times and the run that saved it',
    tags: ['profiles'],
    auth: true,
    scope: 'status',
    async handler(ctx, s) {
      ctx.body = await s.profiles.get(ctx.state.tenant!.tenant_id, idParam(ctx));
    },
  },
  {
    method: 'DELETE',
    path: '/v1/profiles/:id',
    ok: 'profiles.schema.json#/$defs/ProfileDeleted',
    summary: 'Delete a stored profile, every version; the next run or session with that profile_id starts fresh',
    tags: ['profiles'],
    auth: true,
    scope: 'run',
    responses: { '409': 'a run or session holds the profile (its lock); delete it once that ends' },
    async handler(ctx, s) {
      const id = idParam(ctx);
      await s.profiles.delete(ctx.state.tenant!.tenant_id, id);
      ctx.body = { profile_id: id, deleted: true };
    },
  },
];
