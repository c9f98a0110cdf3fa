-- name: ingest_history
-- description: Every ingest run, newest first: source, label, copy time, status, and rows written per table.
-- params: none
SELECT run_id, coalesce(label, source_id) AS source, source_kind, copy_at, started_at, finished_at, status, rows
FROM ingest_runs
ORDER BY started_at DESC
