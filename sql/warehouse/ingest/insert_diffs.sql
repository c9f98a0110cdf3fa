INSERT OR IGNORE INTO raw_diffs BY NAME (SELECT *, $run_id AS run_id FROM new_diffs)
