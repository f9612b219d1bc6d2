-- The embedded store of record: run records, their events, keyed stores
-- (recipes), claims with an expiry (idempotency keys, profile locks, runner
-- leases, tickets), concurrency slots and the webhook outbox.
CREATE TABLE runs (
  run_id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  status TEXT NOT NULL,
  created_at TEXT NOT NULL,
  body TEXT NOT NULL
);
-- newest first per tenant, with run_id breaking ties (the cursor is both)
CREATE INDEX runs_by_tenant ON runs (tenant_id, created_at DESC, run_id DESC);
CREATE INDEX runs_unfinished ON runs (status) WHERE status IN ('queued', 'running');

CREATE TABLE run_events (
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  body TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE kv (
  namespace TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  expires_at INTEGER,
  PRIMARY KEY (namespace, key)
) WITHOUT ROWID;

CREATE TABLE slots (
  key TEXT NOT NULL,
  holder TEXT NOT NULL,
  PRIMARY KEY (key, holder)
) WITHOUT ROWID;

CREATE TABLE webhook_outbox (
  id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  target TEXT NOT NULL,
  payload TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  due_at INTEGER NOT NULL,
  lease_until INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (due_at);
