-- A concurrency slot in one round trip (it took six: BEGIN, lock, held?, count,
-- insert, COMMIT). The same advisory lock per slot set as before orders the
-- takers of one set across replicas; it is the transaction's, so it is held
-- until the insert commits. Each statement of this VOLATILE function takes a
-- fresh snapshot, so the count sees every slot committed before the lock.
CREATE FUNCTION runplane_acquire_slot(p_key TEXT, p_holder TEXT, p_max INTEGER) RETURNS BOOLEAN
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('slots:' || p_key));
  IF EXISTS (SELECT 1 FROM slots WHERE key = p_key AND holder = p_holder) THEN
    RETURN TRUE;
  END IF;
  IF (SELECT count(*) FROM slots WHERE key = p_key) >= p_max THEN
    RETURN FALSE;
  END IF;
  INSERT INTO slots (key, holder) VALUES (p_key, p_holder);
  RETURN TRUE;
END
$$;
