// X-Service-Token -> tenant, then the route's scope. 503 when no auth is
// configured at all; 401 for a missing or unknown token; 403 for a missing scope.
// Routes that declare `openai` also take the token as `Authorization: Bearer
// <token>` (what OpenAI clients send); X-Service-Token wins when both are there.
// Other routes do not: there Authorization belongs to the platform layer
// (`Api-Key`), and one header per credential keeps the service's contract.
// The token goes through the same constant-time lookup and is never logged.
import { ServiceError } from '../errors.ts';
import type { Ctx, Next } from '../context.ts';
import { keyIdOf, type Scope, type TenantResolver } from './tenants.ts';

const BEARER = /^Bearer\s+(\S+)\s*$/i;

export function authenticate(resolver: TenantResolver, opts: { bearer?: boolean } = {}) {
  const missing = opts.bearer ? 'missing credentials: send the tenant token as Authorization: Bearer <token> or X-Service-Token' : 'missing X-Service-Token header';
  const challenge: Record<string, string> = opts.bearer ? { 'WWW-Authenticate': 'Bearer' } : {};
  return async (ctx: Ctx, next: Next) => {
    if (resolver.mode === 'unconfigured') {
      throw new ServiceError('auth_not_configured', 'authentication is not configured: set SERVICE_TENANT_KEYS_PATH or SERVICE_API_TOKEN');
    }
    const header = ctx.get('x-service-token');
    const bearer = opts.bearer && !header ? BEARER.exec(ctx.get('authorization'))?.[1] : undefined;
    const token = header || bearer;
    if (!token) throw new ServiceError('unauthenticated', missing, challenge);
    const tenant = await resolver.resolve(token);
    if (!tenant) throw new ServiceError('unauthenticated', `${header ? 'X-Service-Token' : 'the bearer token'} matches no tenant`, challenge);
    ctx.state.tenant = tenant;
    ctx.state.keyId = keyIdOf(token);
    return next();
  };
}

export function requireScope(ctx: Ctx, scope: Scope): void {
  const tenant = ctx.state.tenant;
  if (!tenant) throw new ServiceError('unauthenticated', 'missing X-Service-Token header');
  if (!tenant.scopes.includes(scope)) {
    throw new ServiceError('forbidden', `this token lacks the '${scope}' scope`);
  }
}
