-- A tenant's concurrency slots are counted at every acceptance (the limit, then
-- the gauge). count(*) over the set read every slot of the tenant: with many
-- runs queued it was most of an acceptance's time. A count row per set, kept by
-- a trigger in the same transaction as the slot, answers at once. Takers of one
-- set are ordered by runplane_acquire_slot's advisory lock; releases by the
-- count row's own lock.
CREATE TABLE slot_counts (
  key TEXT PRIMARY KEY,
  n INTEGER NOT NULL
);

INSERT INTO slot_counts (key, n) SELECT key, count(*) FROM slots GROUP BY key;

CREATE FUNCTION runplane_count_slots() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO slot_counts (key, n) VALUES (NEW.key, 1) ON CONFLICT (key) DO UPDATE SET n = slot_counts.n + 1;
  ELSE
    UPDATE slot_counts SET n = n - 1 WHERE key = OLD.key;
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER slots_counted AFTER INSERT OR DELETE ON slots FOR EACH ROW EXECUTE FUNCTION runplane_count_slots();

CREATE OR REPLACE FUNCTION runplane_acquire_slot(p_key TEXT, p_holder TEXT, p_max INTEGER) RETURNS BOOLEAN
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('slots:' || p_key));
  IF EXISTS (SELECT 1 FROM slots WHERE key = p_key AND holder = p_holder) THEN
    RETURN TRUE;
  END IF;
  IF COALESCE((SELECT n FROM slot_counts WHERE key = p_key), 0) >= p_max THEN
    RETURN FALSE;
  END IF;
  INSERT INTO slots (key, holder) VALUES (p_key, p_holder);
  RETURN TRUE;
END
$$;
