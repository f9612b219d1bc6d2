// The records of the ingest service's metadata (tenants, users, DSNs, the run
// index, connections, intervention commands, preferences). They live in a
// database (meta/store.ts); MetaData is the shape of the JSON file earlier
// versions kept them in, read once at start by meta/import-json.ts.
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
  /** login sessions ended by a logout, by session id, with when their cookie would have expired */
  revoked_sessions: Record<string, number>;
}
