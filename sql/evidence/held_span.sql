-- The time span of the warehouse's data: inference and transaction times and the times of every log
-- file (log_files records each file's first and last record, whatever its kind).
-- params: none
WITH spans AS (
    SELECT min(least(started_at, event_at)) AS first_at, max(greatest(confirmed_at, event_at)) AS last_at
    FROM inferences
    UNION ALL SELECT min(event_at), max(event_at) FROM txs
    UNION ALL SELECT min(first_at), max(last_at) FROM log_files
)
SELECT min(first_at) AS first_at, max(last_at) AS last_at FROM spans
