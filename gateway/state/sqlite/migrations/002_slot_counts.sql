-- A tenant's concurrency slots are counted at every acceptance (the limit, then
-- the gauge). COUNT(*) over the set read every slot of the tenant: with many
-- runs queued it was most of an acceptance's time. A count row per set, kept by
-- triggers in the same transaction as the slot, answers at once.
CREATE TABLE slot_counts (
  key TEXT PRIMARY KEY,
  n INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO slot_counts (key, n) SELECT key, COUNT(*) FROM slots GROUP BY key;

CREATE TRIGGER slots_count_in AFTER INSERT ON slots BEGIN
  INSERT INTO slot_counts (key, n) VALUES (new.key, 1) ON CONFLICT (key) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER slots_count_out AFTER DELETE ON slots BEGIN
  UPDATE slot_counts SET n = n - 1 WHERE key = old.key;
  DELETE FROM slot_counts WHERE key = old.key AND n <= 0;
END;
