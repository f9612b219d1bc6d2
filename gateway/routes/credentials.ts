// /v1/credentials: the tenant's credential vault. No answer ever carries a
// password or a TOTP secret, not even the create's. Writes need the run scope,
// reads the status scope, as recipes' routes do.
import type { Ctx } from '../context.ts';
import { param, type RouteSpec } from './route.ts';

const nameParam = (ctx: Ctx): string => param(ctx, 'name');
/** A credential is a few hundred bytes: a bigger body is hostile, refused before it is parsed. */
const MAX_CREDENTIAL_BODY = 16 * 1024;

export const credentialRoutes: RouteSpec[] = [
  {
    method: 'POST',
    path: '/v1/credentials',
    status: 201,
    ok: 'responses.schema.json#/$defs/Credential',
    summary: 'Store a credential {name, username, password, totp_secret?, origins}; the answer never holds the password or the TOTP secret',
    tags: ['credentials'],
    auth: true,
    scope: 'run',
    body: { schema: 'credentials.schema.json', maxBytes: () => MAX_CREDENTIAL_BODY },
    responses: { '409': 'a credential of that name exists (PUT replaces it), or the tenant keeps the most it may', '503': 'the vault has no key (SERVICE_VAULT_KEY_FILE) on a shared store' },
    async handler(ctx, s) {
      ctx.body = await s.vault.create(ctx.state.tenant!.tenant_id, ctx.state.body);
      ctx.status = 201;
    },
  },
  {
    method: 'GET',
    path: '/v1/credentials',
    ok: 'responses.schema.json#/$defs/CredentialList',
    summary: "List the tenant's credentials (names, usernames, origins; never a secret)",
    tags: ['credentials'],
    auth: true,
    scope: 'status',
    async handler(ctx, s) {
      ctx.body = { credentials: await s.vault.list(ctx.state.tenant!.tenant_id) };
    },
  },
  {
    method: 'GET',
    path: '/v1/credentials/:name',
    ok: 'responses.schema.json#/$defs/Credential',
    summary: 'A credential by name, without its secrets',
    tags: ['credentials'],
    auth: true,
    scope: 'status',
    async handler(ctx, s) {
      ctx.body = await s.vault.get(ctx.state.tenant!.tenant_id, nameParam(ctx));
    },
  },
  {
    method: 'PUT',
    path: '/v1/credentials/:name',
    ok: 'responses.schema.json#/$defs/Credential',
    summary: 'Replace every value of a credential {username, password, totp_secret?, origins}',
    tags: ['credentials'],
    auth: true,
    scope: 'run',
    body: { schema: 'credentials.schema.json#/$defs/CredentialReplaceRequest', maxBytes: () => MAX_CREDENTIAL_BODY },
    async handler(ctx, s) {
      ctx.body = await s.vault.replace(ctx.state.tenant!.tenant_id, nameParam(ctx), ctx.state.body);
    },
  },
  {
    method: 'DELETE',
    path: '/v1/credentials/:name',
    ok: 'responses.schema.json#/$defs/CredentialDeleted',
    summary: 'Delete a credential; steps that name it fail from then on',
    tags: ['credentials'],
    auth: true,
    scope: 'run',
    async handler(ctx, s) {
      const name = nameParam(ctx);
      await s.vault.delete(ctx.state.tenant!.tenant_id, name);
      ctx.body = { name, deleted: true };
    },
  },
];
