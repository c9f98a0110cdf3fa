-- After a vLLM log's rows were appended: remove the rows an earlier run wrote for the same lines of the
-- same file (its rows are replaced by the new ones, e.g. read with another --year or --timezone).
-- Lines beyond this read (a longer copy read before) are kept. The number of rows deleted is the number replaced.
DELETE FROM {table}
WHERE host = $host AND file_id = $file_id AND line <= $lines AND run_id IS DISTINCT FROM $run_id;
