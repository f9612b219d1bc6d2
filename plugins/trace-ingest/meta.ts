// Metadata of the ingest service (tenants, users, DSNs, the run index,
// connections, intervention commands, preferences) in one JSON file written
// atomically (temp file + rename). The file is re-read when another process
// (the operator CLI) changed it, so `npm run ingest-admin` works beside a
// running service.
import { randomBytes } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { atomicWriteFile } from '../../sdk/store.ts';

export interface Tenant {
  tenant_id: string;
  name: string;
  /** model-io capture enabled: otherwise the model-io route answers 403 */
  modelio_enabled: boolean;
  created_at: string;
}

export interface User {
  user_id: string;
  email: string;
  password_hash: string;
  tenant_id: string;
  is_admin: boolean;
  created_at: string;
}

export interface Dsn {
  dsn_id: string;
  tenant_id: string;
  name: string;
  /** sha256 hex of the key; the plaintext is shown once at mint */
  key_hash: string;
  key_prefix: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

export interface RunEntry {
  run_id: string;
  tenant_id: string;
  created_at: string;
  updated_at: string;
  status: string | null;
  client_name: string | null;
  debug_session_id: string | null;
  step_count: number;
  parent_run_id: string | null;
  group_id: string | null;
  session_type: string | null;
  /** canonical step_id by step index */
  canonical: Record<string, string>;
}

export interface Command {
  command_id: string;
  seq: number;
  type: string;
  payload: Record<string, unknown>;
  operator_id: string | null;
  issued_at: string;
}

export interface Connection {
  tenant_id: string;
  client_id: string;
  dsn_id: string;
  client_name: string | null;
  client_version: string | null;
  capture_mode: string | null;
  run_id: string | null;
  last_event: string | null;
  last_seen: string;
  calls: number;
}

export interface Preference {
  preference_id: string;
  tenant_id: string;
  run_id_a: string;
  run_id_b: string;
  preferred: 'a' | 'b' | 'tie';
  step_index: number | null;
  rationale: string | null;
  user_id: string;
  created_at: string;
}

export interface MetaData {
  version: 1;
  cookie_secret: string;
  tenants: Record<string, Tenant>;
  users: Record<string, User>;
  dsns: Record<string, Dsn>;
  runs: Record<string, RunEntry>;
  commands: Record<string, Command[]>;
  connections: Record<string, Connection>;
  preferences: Preference[];
  /** login sessions ended by a logout, by session id, with when their cookie would have expired (pruned after) */
  revoked_sessions: Record<string, number>;
}

const empty = (): MetaData => ({
  version: 1,
  cookie_secret: randomBytes(32).toString('base64url'),
  tenants: {},
  users: {},
  dsns: {},
  runs: {},
  commands: {},
  connections: {},
  preferences: [],
  revoked_sessions: {},
});

export class MetaStore {
  data: MetaData = empty();
  private mtimeMs = 0;
  private writing: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | null = null;
  private lastCheck = 0;

  constructor(readonly file: string) {}

  static async open(file: string): Promise<MetaStore> {
    const m = new MetaStore(file);
    await m.reload(true);
    if (!m.mtimeMs) await m.save();
    return m;
  }

  /** Re-reads the file when it changed on disk (at most every 250 ms unless forced). */
  async reload(force = false): Promise<void> {
    const now = Date.now();
    if (!force && now - this.lastCheck < 250) return;
    this.lastCheck = now;
    const st = await stat(this.file).catch(() => null);
    if (!st || st.mtimeMs === this.mtimeMs) return;
    const text = await readFile(this.file, 'utf8');
    const parsed = { ...empty(), ...(JSON.parse(text) as MetaData) };
    this.data = this.mtimeMs ? merge(this.data, parsed) : parsed;
    this.mtimeMs = st.mtimeMs;
  }

  /** Writes the file now (serialized with other writes). */
  save(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.writing = this.writing.then(async () => {
      // another process (the operator CLI) wrote since we read: fold its changes in first
      const st = await stat(this.file).catch(() => null);
      if (st && st.mtimeMs !== this.mtimeMs) await this.reload(true);
      await atomicWriteFile(this.file, `${JSON.stringify(this.data, null, 1)}\n`);
      this.mtimeMs = (await stat(this.file)).mtimeMs;
    });
    return this.writing;
  }

  /** Writes within 200 ms (for the run index, connections and commands under load). */
  saveSoon(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.save().catch(() => undefined);
    }, 200);
    this.timer.unref();
  }

  async close(): Promise<void> {
    if (this.timer) await this.save();
    await this.writing;
  }
}

/**
 * Folds the file on disk into the in-memory state. Accounts (tenants, users,
 * DSNs) are written by the CLI and the admin routes: the disk's version of an
 * entry wins (a DSN keeps the later last_used_at). Runs, commands, connections
 * and preferences are the service's own: memory wins, the disk adds what is missing.
 */
export function merge(memory: MetaData, disk: MetaData): MetaData {
  const dsns: Record<string, Dsn> = { ...memory.dsns, ...disk.dsns };
  for (const [id, d] of Object.entries(dsns)) {
    const m = memory.dsns[id]?.last_used_at ?? null;
    if (m && (!d.last_used_at || m > d.last_used_at)) dsns[id] = { ...dsns[id]!, last_used_at: m };
    // a revoke is never undone by a merge: the earliest revoked_at of either side stays
    const r = [memory.dsns[id]?.revoked_at, disk.dsns[id]?.revoked_at].filter((x): x is string => !!x).sort()[0];
    if (r && dsns[id]!.revoked_at !== r) dsns[id] = { ...dsns[id]!, revoked_at: r };
  }
  const prefIds = new Set(memory.preferences.map((p) => p.preference_id));
  // a revoke is never undone by a merge either: the union of both sides, less what expired anyway
  const now = Date.now() / 1000;
  const revoked = Object.fromEntries(Object.entries({ ...(disk.revoked_sessions ?? {}), ...(memory.revoked_sessions ?? {}) }).filter(([, exp]) => exp > now));
  return {
    version: 1,
    cookie_secret: disk.cookie_secret || memory.cookie_secret,
    tenants: { ...memory.tenants, ...disk.tenants },
    users: { ...memory.users, ...disk.users },
    dsns,
    runs: { ...disk.runs, ...memory.runs },
    commands: { ...disk.commands, ...memory.commands },
    connections: { ...disk.connections, ...memory.connections },
    preferences: [...memory.preferences, ...disk.preferences.filter((p) => !prefIds.has(p.preference_id))],
    revoked_sessions: revoked,
  };
}
