-- Each step's canonical step_id in its own row, claimed with INSERT ... ON CONFLICT
-- DO NOTHING: two replicas ingesting one run agree on it (a JSON map in trace_runs
-- was read, changed and written back whole, and the last writer won).
CREATE TABLE trace_run_steps (run_id TEXT NOT NULL, step_index INTEGER NOT NULL, step_id TEXT NOT NULL, PRIMARY KEY (run_id, step_index));
INSERT INTO trace_run_steps (run_id, step_index, step_id)
  SELECT r.run_id, CAST(j.key AS INTEGER), j.value FROM trace_runs r, json_each(r.canonical) j WHERE j.type = 'text' ON CONFLICT DO NOTHING;
UPDATE trace_runs SET canonical = '{}';
