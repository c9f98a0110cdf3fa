-- insert_diffs.sql when the warehouse holds none of the chunk's diffs (none deduplicated, no fork): a plain
-- INSERT of the same rows. params: $run_id
INSERT INTO raw_diffs BY NAME (SELECT *, $run_id AS run_id FROM new_diffs)
