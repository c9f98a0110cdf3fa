-- A second copy of one file in the same run (same identity, e.g. a log and its gzipped twin): the rows the
-- first copy wrote in this run are replaced by this copy's.
DELETE FROM {table} WHERE host = $host AND file_id = $file_id AND run_id = $run_id;
