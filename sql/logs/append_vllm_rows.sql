-- Append one chunk's rows of a vLLM log (registered as new_log_rows) to {table}: the chunk's columns by
-- name (file_id and line of the file each row belongs to), the run's constants, and the record key
-- (file identity : line of the record's first line).
INSERT INTO {table} BY NAME
SELECT *, $host AS host, $run_id AS run_id, file_id || ':' || line AS record_key
FROM new_log_rows;
