-- The trace ingest service's metadata (was meta.json). Booleans are 0/1 integers
-- and JSON values are text, the same on PostgreSQL, so one set of queries serves both.
CREATE TABLE trace_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE trace_tenants (tenant_id TEXT PRIMARY KEY, name TEXT NOT NULL, modelio_enabled INTEGER NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE trace_users (user_id TEXT PRIMARY KEY, email TEXT NOT NULL UNIQUE, password_hash TEXT NOT NULL, tenant_id TEXT NOT NULL, is_admin INTEGER NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE trace_dsns (dsn_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, name TEXT NOT NULL, key_hash TEXT NOT NULL UNIQUE, key_prefix TEXT NOT NULL, created_at TEXT NOT NULL, last_used_at TEXT, revoked_at TEXT);
CREATE INDEX trace_dsns_tenant ON trace_dsns (tenant_id);
CREATE TABLE trace_revoked_sessions (sid TEXT PRIMARY KEY, expires_at BIGINT NOT NULL);
CREATE TABLE trace_runs (run_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, status TEXT, client_name TEXT, debug_session_id TEXT, step_count INTEGER NOT NULL, parent_run_id TEXT, group_id TEXT, session_type TEXT, canonical TEXT NOT NULL);
-- GET /runs: a tenant's runs newest first, paged by (created_at, run_id)
CREATE INDEX trace_runs_tenant_created ON trace_runs (tenant_id, created_at DESC, run_id DESC);
CREATE TABLE trace_commands (run_id TEXT NOT NULL, seq INTEGER NOT NULL, command_id TEXT NOT NULL, type TEXT NOT NULL, payload TEXT NOT NULL, operator_id TEXT, issued_at TEXT NOT NULL, PRIMARY KEY (run_id, seq));
CREATE TABLE trace_connections (tenant_id TEXT NOT NULL, client_id TEXT NOT NULL, dsn_id TEXT NOT NULL, client_name TEXT, client_version TEXT, capture_mode TEXT, run_id TEXT, last_event TEXT, last_seen TEXT NOT NULL, calls INTEGER NOT NULL, PRIMARY KEY (tenant_id, client_id));
CREATE INDEX trace_connections_seen ON trace_connections (tenant_id, last_seen);
CREATE TABLE trace_preferences (preference_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, run_id_a TEXT NOT NULL, run_id_b TEXT NOT NULL, preferred TEXT NOT NULL, step_index INTEGER, rationale TEXT, user_id TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE INDEX trace_preferences_tenant ON trace_preferences (tenant_id, created_at);
