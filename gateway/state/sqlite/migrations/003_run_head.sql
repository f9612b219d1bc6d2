-- A status poll reads five small fields of a run, but the row's body holds its
-- plan, every step entry and its log lines. Each write now also stores those
-- fields (HEAD_KEYS) as a small JSON text the poll reads instead. Rows written
-- before keep NULL here until their next write; a poll of one reads the body.
ALTER TABLE runs ADD COLUMN head TEXT;
