// What every WebSocket upgrade on the gateway shares: the tenant from X-Service-Token
// (or a ticket the caller redeems), and a refusal as a plain HTTP answer with {detail}
// (the socket never becomes a WebSocket, so a client sees the status and its reason).
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { ServiceError, isServiceError } from '../errors.ts';
import { dependencyError } from './errors.ts';
import type { Services } from '../services.ts';
import type { Tenant } from './tenants.ts';

/** The tenant of the X-Service-Token header; undefined when the request has none. */
export async function headerTenant(req: IncomingMessage, s: Services): Promise<Tenant | undefined> {
  const token = req.headers['x-service-token'];
  if (typeof token !== 'string' || !token) return undefined;
  if (s.tenants.mode === 'unconfigured') throw new ServiceError('auth_not_configured', 'authentication is not configured');
  const t = await s.tenants.resolve(token);
  if (!t) throw new ServiceError('unauthenticated', 'X-Service-Token matches no tenant');
  return t;
}

const STATUS_TEXT: Record<number, string> = { 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 409: 'Conflict', 429: 'Too Many Requests', 503: 'Service Unavailable' };

export function refuseUpgrade(socket: Duplex, err: unknown): void {
  const e = isServiceError(err) ? err : (dependencyError(err) ?? new ServiceError('internal', 'internal error'));
  const body = JSON.stringify({ detail: e.detail });
  const extra = Object.entries(e.headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  socket.end(`HTTP/1.1 ${e.status} ${STATUS_TEXT[e.status] ?? 'Error'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}Connection: close\r\n\r\n${body}`);
}
