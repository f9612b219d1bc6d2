// X-Service-Token -> tenant, then the route's scope. 503 when no auth is
// configured at all; 401 for a missing or unknown token; 403 for a missing scope.
import { ServiceError } from '../errors.ts';
import type { Ctx, Next } from '../context.ts';
import type { Scope, TenantResolver } from './tenants.ts';

export function authenticate(resolver: TenantResolver) {
  return async (ctx: Ctx, next: Next) => {
    if (resolver.mode === 'unconfigured') {
      throw new ServiceError('auth_not_configured', 'authentication is not configured: set SERVICE_TENANT_KEYS_PATH or SERVICE_API_TOKEN');
    }
    const token = ctx.get('x-service-token');
    if (!token) throw new ServiceError('unauthenticated', 'missing X-Service-Token header');
    const tenant = await resolver.resolve(token);
    if (!tenant) throw new ServiceError('unauthenticated', 'X-Service-Token matches no tenant');
    ctx.state.tenant = tenant;
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
