-- Diffs the warehouse lacks; a diff it holds stays (the same bytes, or a fork: pipeline/ingest/coverage.py).
INSERT OR IGNORE INTO raw_diffs BY NAME (SELECT *, $run_id AS run_id FROM new_diffs)
