// Encryption at rest of the vault's values: AES-256-GCM under a key per tenant,
// derived with HKDF-SHA256 (info = the tenant id) from one operator secret, so a
// leaked row of one tenant says nothing of another's key, and a row moved to
// another tenant or name fails its tag (the AAD binds it to tenant/name).
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

const SALT = 'runplane-vault-v1';
const VERSION = 'v1';

export class VaultKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'VaultKeyError';
  }
}

/** The operator secret's bytes from a key file: 64+ hex characters, or base64 of 32+ bytes. */
export function parseVaultKey(text: string, file: string): Buffer {
  const t = text.trim();
  const bytes = /^[0-9a-fA-F]{64,}$/.test(t) && t.length % 2 === 0 ? Buffer.from(t, 'hex') : /^[A-Za-z0-9+/_-]+={0,2}$/.test(t) ? Buffer.from(t, 'base64') : Buffer.alloc(0);
  if (bytes.length < 32) throw new VaultKeyError(`the vault key file ${file} must hold at least 32 bytes as hex (64+ characters) or base64`);
  return bytes;
}

export interface VaultKeySource {
  /** SERVICE_VAULT_KEY_FILE: the operator's file; must exist */
  file?: string;
  /** where the embedded default keeps (and on first use creates) vault.key */
  secretsDir: string;
  /** true on a shared store (several replicas): a key made here would be this replica's alone, so none is made */
  shared: boolean;
}

/**
 * The operator secret, read once on first use. Without SERVICE_VAULT_KEY_FILE the
 * embedded default makes <secrets dir>/vault.key (0600, 32 random bytes) the first
 * time, as start.ts makes the tenant keys file; `wx` so two processes racing to
 * create it both end up with the one that won.
 */
export async function readVaultKey(src: VaultKeySource): Promise<Buffer> {
  if (src.file) {
    const text = await readFile(src.file, 'utf8').catch(() => {
      throw new VaultKeyError(`SERVICE_VAULT_KEY_FILE ${src.file} cannot be read`);
    });
    return parseVaultKey(text, src.file);
  }
  const file = path.join(src.secretsDir, 'vault.key');
  const existing = await readFile(file, 'utf8').catch(() => undefined);
  if (existing !== undefined) return parseVaultKey(existing, file);
  if (src.shared) throw new VaultKeyError('the credential vault needs SERVICE_VAULT_KEY_FILE (or vault.key in SERVICE_SECRETS_DIR) shared by every replica');
  await mkdir(src.secretsDir, { recursive: true, mode: 0o700 });
  try {
    await writeFile(file, randomBytes(32).toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
    await chmod(file, 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  return parseVaultKey(await readFile(file, 'utf8'), file);
}

/** Leading bytes of a sealed blob (a profile archive): format and version. */
const BLOB_MAGIC = Buffer.from('RPS1');
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** Seals and opens values of one operator secret, with a key per tenant. */
export class Sealer {
  private readonly keys = new Map<string, Buffer>();
  private readonly blobKeys = new Map<string, Buffer>();

  constructor(private readonly master: Buffer) {}

  /** The tenant's key for blobs: its own HKDF info label, so a blob key is never a value key. */
  private blobKey(tenantId: string): Buffer {
    let k = this.blobKeys.get(tenantId);
    if (!k) {
      k = Buffer.from(hkdfSync('sha256', this.master, SALT, `profiles\u0000${tenantId}`, 32));
      this.blobKeys.set(tenantId, k);
    }
    return k;
  }

  /** AES-256-GCM of `plain` under the tenant's blob key; `label` (tenant/profile/version) is bound as AAD, so a blob moved elsewhere fails. */
  sealBytes(tenantId: string, label: string, plain: Buffer): Buffer {
    const iv = randomBytes(IV_BYTES);
    const c = createCipheriv('aes-256-gcm', this.blobKey(tenantId), iv);
    c.setAAD(Buffer.from(`${tenantId}/${label}`));
    const body = Buffer.concat([c.update(plain), c.final()]);
    return Buffer.concat([BLOB_MAGIC, iv, body, c.getAuthTag()]);
  }

  /** Throws VaultKeyError when the blob was not sealed for this tenant and label under this operator secret. */
  openBytes(tenantId: string, label: string, sealed: Buffer): Buffer {
    if (sealed.length < BLOB_MAGIC.length + IV_BYTES + TAG_BYTES || !sealed.subarray(0, BLOB_MAGIC.length).equals(BLOB_MAGIC)) throw new VaultKeyError('a sealed blob of an unknown format');
    const iv = sealed.subarray(BLOB_MAGIC.length, BLOB_MAGIC.length + IV_BYTES);
    const d = createDecipheriv('aes-256-gcm', this.blobKey(tenantId), iv);
    d.setAAD(Buffer.from(`${tenantId}/${label}`));
    d.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    try {
      return Buffer.concat([d.update(sealed.subarray(BLOB_MAGIC.length + IV_BYTES, sealed.length - TAG_BYTES)), d.final()]);
    } catch {
      throw new VaultKeyError('a sealed blob does not open with this vault key (another key file, or a blob moved)');
    }
  }

  private key(tenantId: string): Buffer {
    let k = this.keys.get(tenantId);
    if (!k) {
      k = Buffer.from(hkdfSync('sha256', this.master, SALT, tenantId, 32));
      this.keys.set(tenantId, k);
    }
    return k;
  }

  seal(tenantId: string, name: string, plain: string): string {
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', this.key(tenantId), iv);
    c.setAAD(Buffer.from(`${tenantId}/${name}`));
    const body = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
    return [VERSION, iv.toString('base64url'), body.toString('base64url'), c.getAuthTag().toString('base64url')].join('.');
  }

  /** Throws when the text was not sealed for this tenant and name under this operator secret. */
  open(tenantId: string, name: string, sealed: string): string {
    const [v, iv, body, tag] = sealed.split('.');
    if (v !== VERSION || !iv || body === undefined || !tag) throw new VaultKeyError('a sealed value of an unknown format');
    const d = createDecipheriv('aes-256-gcm', this.key(tenantId), Buffer.from(iv, 'base64url'));
    d.setAAD(Buffer.from(`${tenantId}/${name}`));
    d.setAuthTag(Buffer.from(tag, 'base64url'));
    try {
      return Buffer.concat([d.update(Buffer.from(body, 'base64url')), d.final()]).toString('utf8');
    } catch {
      throw new VaultKeyError('a sealed value does not open with this vault key (another key file, or a row moved)');
    }
  }
}

/**
 * The sealer of `key`, its key read on first use and kept; a key that cannot be had
 * is `unavailable(why)` to the caller (a 503 as a rule), and is tried again next time.
 */
export function sealerOnDemand(key: VaultKeySource, unavailable: (why: string) => Error): () => Promise<Sealer> {
  let sealer: Promise<Sealer> | undefined;
  return async () => {
    sealer ??= readVaultKey(key).then((k) => new Sealer(k));
    try {
      return await sealer;
    } catch (err) {
      sealer = undefined;
      if (err instanceof VaultKeyError) throw unavailable(err.message);
      throw err;
    }
  };
}
