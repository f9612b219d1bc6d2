// The credential vault: a tenant's logins in the store of record, their values
// sealed (sealing.ts), shown by the API without them, and revealed only to the
// runner, for one page whose origin is on the credential's list.
import { Secret, TOTP } from 'otpauth';
import { ServiceError, badRequest, notFound } from '../errors.ts';
import { unreachableDependency, type KeyedStore, type StateBackend } from '../state/backend.ts';
import { validator, describeError } from '../../schemas/index.ts';
import type { Credential, CredentialCreateRequest, CredentialReplaceRequest, CredentialRef } from '../../schemas/types.gen.ts';
import { sealerOnDemand, type Sealer, type VaultKeySource } from './sealing.ts';

export type { Credential, CredentialRef };

/** What the store keeps: the shown fields, and the secret ones sealed together. */
interface StoredCredential extends Credential {
  sealed: string;
}

interface SecretValues {
  password: string;
  totp_secret?: string;
}

/** The runner's answer to a credential it asked to type: the value, or why the page may not have it (no value then). */
export type Revealed = { value: string } | { refused: string };

const validCreate = validator<CredentialCreateRequest>('credentials.schema.json');
const validReplace = validator<CredentialReplaceRequest>('credentials.schema.json#/$defs/CredentialReplaceRequest');
const validName = validator<string>('credentials.schema.json#/$defs/CredentialName');
export const validRef = validator<CredentialRef>('credentials.schema.json#/$defs/CredentialRef');

/** RFC 6238 as most sites use it (Google Authenticator's defaults). */
function totpOf(secret: string): TOTP {
  return new TOTP({ secret: Secret.fromBase32(secret.replace(/=+$/, '').toUpperCase()), algorithm: 'SHA1', digits: 6, period: 30 });
}

/** The origin a page's URL is on, or undefined for one that has none (about:blank, data:). */
export function originOf(url: string): string | undefined {
  try {
    const o = new URL(url).origin;
    return o === 'null' ? undefined : o;
  } catch {
    return undefined;
  }
}

/** The schema's pattern lets through strings URL parses to another origin (a default port, upper case, a trailing dot): each must be its own origin exactly. */
function checkOrigins(origins: string[]): void {
  for (const o of origins) {
    if (originOf(o) !== o) throw badRequest(`origins: '${o.slice(0, 200)}' is not an exact origin (scheme://host[:port] as a browser writes it, e.g. ${originOf(o) ?? 'https://login.example.com'})`, 'origins');
  }
}

function checkTotp(secret: string | undefined): void {
  if (secret === undefined) return;
  try {
    if (Secret.fromBase32(secret.replace(/=+$/, '').toUpperCase()).bytes.length < 10) throw new Error('short');
  } catch {
    throw badRequest('totp_secret: not a base32 secret of at least 80 bits', 'totp_secret');
  }
}

export interface VaultOptions {
  key: VaultKeySource;
  /** most credentials one tenant may keep */
  maxPerTenant: number;
}

export class CredentialVault {
  private readonly seal: () => Promise<Sealer>;

  constructor(
    private readonly backend: StateBackend,
    private readonly o: VaultOptions,
  ) {
    this.seal = sealerOnDemand(o.key, (why) => new ServiceError('unavailable', `the credential vault is not configured: ${why}`));
  }

  private store(tenantId: string): KeyedStore<StoredCredential> {
    return this.backend.store<StoredCredential>(`credentials:${tenantId}`);
  }

  async create(tenantId: string, body: unknown): Promise<Credential> {
    if (!validCreate(body)) throw badRequest(describeError('', validCreate.errors));
    const { name, ...rest } = body;
    const s = this.store(tenantId);
    if (await s.get(name)) throw new ServiceError('conflict', `a credential named '${name}' exists; PUT /v1/credentials/${name} replaces it`);
    if ((await s.keys()).length >= this.o.maxPerTenant) throw new ServiceError('conflict', `a tenant keeps at most ${this.o.maxPerTenant} credentials; delete one first`);
    return this.write(tenantId, name, rest, new Date().toISOString());
  }

  async replace(tenantId: string, name: string, body: unknown): Promise<Credential> {
    if (!validName(name)) throw notFound('credential not found');
    if (!validReplace(body)) throw badRequest(describeError('', validReplace.errors));
    const old = await this.store(tenantId).get(name);
    if (!old) throw notFound('credential not found');
    return this.write(tenantId, name, body, old.created_at);
  }

  private async write(tenantId: string, name: string, b: CredentialReplaceRequest, createdAt: string): Promise<Credential> {
    checkOrigins(b.origins);
    checkTotp(b.totp_secret);
    const sealer = await this.seal();
    const secrets: SecretValues = { password: b.password, ...(b.totp_secret ? { totp_secret: b.totp_secret } : {}) };
    const now = new Date().toISOString();
    const shown: Credential = { name, username: b.username, origins: [...b.origins], has_totp: b.totp_secret !== undefined, created_at: createdAt, updated_at: now };
    try {
      await this.store(tenantId).set(name, { ...shown, sealed: sealer.seal(tenantId, name, JSON.stringify(secrets)) });
    } catch (err) {
      // a store that cannot be reached is 503 (the error middleware knows it), any other failure was not applied
      if (unreachableDependency(err)) throw err;
      throw new ServiceError('persist_failed', `credential '${name}' could not be stored and was not applied`);
    }
    return shown;
  }

  async list(tenantId: string): Promise<Credential[]> {
    const s = this.store(tenantId);
    const all = await Promise.all((await s.keys()).map((k) => s.get(k)));
    return all.filter((c): c is StoredCredential => c !== undefined).map(shownOf);
  }

  /** Another tenant's credential, or a name no credential can have, is 404 like a missing one. */
  async get(tenantId: string, name: string): Promise<Credential> {
    const c = validName(name) ? await this.store(tenantId).get(name) : undefined;
    if (!c) throw notFound('credential not found');
    return shownOf(c);
  }

  async delete(tenantId: string, name: string): Promise<void> {
    if (!validName(name) || !(await this.store(tenantId).delete(name))) throw notFound('credential not found');
  }

  /**
   * The value of `ref` for a page at `pageUrl`, computed now (a TOTP code for this
   * 30 s window); refused, with no value, when the page's origin is not on the
   * credential's list. Only the runner calls this, at the moment it types.
   */
  async reveal(tenantId: string, ref: CredentialRef, pageUrl: string): Promise<Revealed> {
    const c = validName(ref.name) ? await this.store(tenantId).get(ref.name) : undefined;
    if (!c) return { refused: `no credential named '${ref.name.slice(0, 64)}'` };
    const origin = originOf(pageUrl);
    if (!origin || !c.origins.includes(origin)) {
      return { refused: `credential '${c.name}' may not be typed into a page on ${origin ?? `'${pageUrl.slice(0, 100)}'`} (its origins: ${c.origins.join(', ')})` };
    }
    if (ref.field === 'username') return { value: c.username };
    let secrets: SecretValues;
    try {
      secrets = JSON.parse((await this.seal()).open(tenantId, c.name, c.sealed)) as SecretValues;
    } catch (err) {
      return { refused: `credential '${c.name}' cannot be opened: ${err instanceof Error ? err.message : 'unknown error'}` };
    }
    if (ref.field === 'password') return { value: secrets.password };
    if (!secrets.totp_secret) return { refused: `credential '${c.name}' has no TOTP secret` };
    return { value: totpOf(secrets.totp_secret).generate() };
  }
}

function shownOf(c: StoredCredential): Credential {
  return { name: c.name, username: c.username, origins: c.origins, has_totp: c.has_totp, created_at: c.created_at, ...(c.updated_at ? { updated_at: c.updated_at } : {}) };
}
