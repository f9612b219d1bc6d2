// Resolves an X-Service-Token to a tenant. Three modes, as the spec: a keys file
// re-read at most every keysCacheMs (hot reload for add, rotate, revoke), one
// SERVICE_API_TOKEN for a single tenant, or nothing configured (503).
import { hash, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { validator, describeError } from '../../schemas/index.ts';
import type { Logger } from '../log.ts';
import { allowedDomainProblem } from '../../shared/allowed-domains.ts';

import type { TenantConfig } from '../../schemas/types.gen.ts';

export type Scope = NonNullable<TenantConfig['scopes']>[number];

/** The named fields of a generated type, without its `[k: string]: unknown` index signature. */
type KnownKeys<T> = keyof { [K in keyof T as string extends K ? never : number extends K ? never : K]: T[K] };

/** A TenantConfig with every default of the spec filled in. */
export type Tenant = { [K in Exclude<KnownKeys<TenantConfig>, 'default_compute_backend' | 'proxy_provider'>]-?: NonNullable<TenantConfig[K]> } & Pick<TenantConfig, 'default_compute_backend' | 'proxy_provider'>;

export interface TenantResolver {
  readonly mode: 'keys-file' | 'single-token' | 'unconfigured';
  /** The tenant a token belongs to, or null. */
  resolve(token: string): Promise<Tenant | null>;
  /** The current configuration of a tenant id (any of its tokens), or null when it has none left. */
  resolveById(tenantId: string): Promise<Tenant | null>;
}

// one-shot: crypto.hash skips the Hash object createHash builds per call (the
// hottest part of an authenticated request in bench/gateway)
const digest = (token: string): Buffer => hash('sha256', token, 'buffer');

/**
 * A key's id for the record (who took over a run): the first 16 hex digits of the token's
 * sha256, so events can tell two keys of a tenant apart without holding anything that opens one.
 */
export const keyIdOf = (token: string): string => `key_${digest(token).toString('hex').slice(0, 16)}`;

const validateTenant = validator<Tenant>('tenant-keys.schema.json#/$defs/TenantConfig');

/** Fills every default of the spec's TenantConfig table; null when the entry is invalid. */
export function tenantFromConfig(raw: unknown): { tenant: Tenant } | { problem: string } {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return { problem: 'entry must be an object' };
  const copy = structuredClone(raw) as Record<string, unknown>;
  if (!validateTenant(copy)) return { problem: describeError('', validateTenant.errors) };
  const t = copy as unknown as Tenant;
  // a malformed range or a wildcard over an address would silently match nothing
  // the operator meant to allow; the entry is refused (and logged) like any invalid one
  for (const [i, pattern] of (t.allowed_domains ?? []).entries()) {
    const problem = allowedDomainProblem(pattern);
    if (problem) return { problem: `allowed_domains[${i}]: ${problem}` };
  }
  t.scopes = [...new Set(t.scopes)];
  return { tenant: t };
}

export class UnconfiguredResolver implements TenantResolver {
  readonly mode = 'unconfigured' as const;
  async resolve(): Promise<Tenant | null> {
    return null;
  }
  async resolveById(): Promise<Tenant | null> {
    return null;
  }
}

export class SingleTokenResolver implements TenantResolver {
  readonly mode = 'single-token' as const;
  private readonly expected: Buffer;
  private readonly tenant: Tenant;

  constructor(token: string, tenantId: string) {
    this.expected = digest(token);
    const r = tenantFromConfig({ tenant_id: tenantId });
    if ('problem' in r) throw new Error(`SERVICE_API_TENANT_ID is invalid: ${r.problem}`);
    this.tenant = r.tenant;
  }

  async resolve(token: string): Promise<Tenant | null> {
    return timingSafeEqual(digest(token), this.expected) ? this.tenant : null;
  }

  async resolveById(tenantId: string): Promise<Tenant | null> {
    return tenantId === this.tenant.tenant_id ? this.tenant : null;
  }
}

export class KeysFileResolver implements TenantResolver {
  readonly mode = 'keys-file' as const;
  // sha256(token) hex -> tenant. Looking up by digest leaks nothing about the
  // token through timing; the final compare is constant-time as well.
  private byDigest = new Map<string, { digest: Buffer; tenant: Tenant }>();
  private lastCheck = -Infinity;
  private lastText: string | undefined;
  private loading: Promise<void> | undefined;

  constructor(
    private readonly file: string,
    private readonly cacheMs: number,
    private readonly log: Logger,
    private readonly clock: () => number = Date.now,
  ) {}

  async resolve(token: string): Promise<Tenant | null> {
    if (this.stale()) await this.refresh();
    const d = digest(token);
    const hit = this.byDigest.get(d.toString('hex'));
    return hit && timingSafeEqual(hit.digest, d) ? hit.tenant : null;
  }

  async resolveById(tenantId: string): Promise<Tenant | null> {
    if (this.stale()) await this.refresh();
    for (const { tenant } of this.byDigest.values()) if (tenant.tenant_id === tenantId) return tenant;
    return null;
  }

  /** True when the keys were last read cacheMs ago or more; a fresh cache answers without an await. */
  private stale(): boolean {
    return this.clock() - this.lastCheck >= this.cacheMs;
  }

  /** Re-reads the file when the cache is older than cacheMs; one read at a time. */
  async refresh(force = false): Promise<void> {
    if (!force && this.clock() - this.lastCheck < this.cacheMs) return;
    if (!this.loading) {
      this.loading = this.load().finally(() => {
        this.lastCheck = this.clock();
        this.loading = undefined;
      });
    }
    await this.loading;
  }

  private async load(): Promise<void> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      this.log.error({ path: this.file, code: (err as NodeJS.ErrnoException).code }, 'tenant keys file unreadable; keeping the last good configuration');
      return;
    }
    if (text === this.lastText) return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      this.log.error({ path: this.file }, 'tenant keys file is not valid JSON; keeping the last good configuration');
      return;
    }
    const keys = (parsed as { tenant_keys?: unknown } | null)?.tenant_keys;
    if (typeof keys !== 'object' || keys === null || Array.isArray(keys)) {
      this.log.error({ path: this.file }, 'tenant keys file must be {"tenant_keys": {<token>: {...}}}; keeping the last good configuration');
      return;
    }
    const next = new Map<string, { digest: Buffer; tenant: Tenant }>();
    let index = 0;
    for (const [token, entry] of Object.entries(keys as Record<string, unknown>)) {
      index++;
      const r = tenantFromConfig(entry);
      const tenantId = typeof (entry as { tenant_id?: unknown })?.tenant_id === 'string' ? (entry as { tenant_id: string }).tenant_id : undefined;
      if ('problem' in r) {
        // Name the entry by position and tenant id, never by its token.
        this.log.error({ path: this.file, entry: index, tenant_id: tenantId?.slice(0, 80) }, `tenant entry rejected: ${r.problem}`);
        continue;
      }
      if (token.length === 0) {
        this.log.error({ path: this.file, entry: index, tenant_id: tenantId }, 'tenant entry rejected: empty token');
        continue;
      }
      const d = digest(token);
      next.set(d.toString('hex'), { digest: d, tenant: r.tenant });
    }
    this.byDigest = next;
    this.lastText = text;
    this.log.info({ path: this.file, tokens: next.size }, 'tenant keys loaded');
  }
}
