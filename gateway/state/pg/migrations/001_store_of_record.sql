-- The shared store of record (SERVICE_DATABASE_URL): the same tables as the
-- embedded SQLite store, for replicas on several hosts. Times are
-- milliseconds since the epoch from the database server's clock, so replicas
-- with skewed clocks agree on every expiry. Sort keys are COLLATE "C" (byte
-- order), the order SQLite and the in-memory stores page in.
CREATE TABLE runs (
  run_id TEXT COLLATE "C" PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  status TEXT NOT NULL,
  created_at TEXT COLLATE "C" NOT NULL,
  body TEXT NOT NULL
);
CREATE INDEX runs_by_tenant ON runs (tenant_id, created_at DESC, run_id DESC);
CREATE INDEX runs_by_tenant_status ON runs (tenant_id, status, created_at DESC, run_id DESC);
CREATE INDEX runs_unfinished ON runs (status) WHERE status IN ('queued', 'running');

-- the last seq of each run's log: its row lock orders concurrent appenders
CREATE TABLE run_event_seq (
  run_id TEXT PRIMARY KEY,
  seq BIGINT NOT NULL
);
CREATE TABLE run_events (
  run_id TEXT NOT NULL,
  seq BIGINT NOT NULL,
  body TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
);

CREATE TABLE kv (
  namespace TEXT NOT NULL,
  key TEXT COLLATE "C" NOT NULL,
  value TEXT NOT NULL,
  expires_at BIGINT,
  PRIMARY KEY (namespace, key)
);

CREATE TABLE slots (
  key TEXT NOT NULL,
  holder TEXT NOT NULL,
  PRIMARY KEY (key, holder)
);

CREATE TABLE buckets (
  key TEXT PRIMARY KEY,
  tokens DOUBLE PRECISION NOT NULL,
  ts BIGINT NOT NULL,
  -- whether the last take got a token
  allowed BOOLEAN NOT NULL
);

CREATE TABLE webhook_outbox (
  id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  target TEXT NOT NULL,
  payload TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  due_at BIGINT NOT NULL,
  lease_until BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (due_at);
