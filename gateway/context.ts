// The per-request state every middleware and route shares.
import type { ParameterizedContext } from 'koa';
import type { Tenant } from './http/tenants.ts';

export interface GatewayState {
  requestId: string;
  /** path as the client sent it, before platform rewrites */
  originalPath: string;
  tenant?: Tenant;
  /** the id of the key that authenticated the request (keyIdOf: never the token) */
  keyId?: string;
  body?: unknown;
  /** set by a route that declares `openai`: its errors take OpenAI's shape */
  errorShape?: 'openai';
}

export type Ctx = ParameterizedContext<GatewayState>;
export type Next = () => Promise<unknown>;
