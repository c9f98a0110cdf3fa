-- Sources whose latest ingest run did not succeed: failed, or still "running" because it was
-- killed. The chunks it committed before it stopped are in the warehouse, so every footer warns.
SELECT source_id, source_kind, label, run_id, status
FROM (
    SELECT *, row_number() OVER (PARTITION BY source_id ORDER BY {run_order} DESC, started_at DESC, run_id DESC) AS recency
    FROM ingest_runs
)
WHERE recency = 1 AND status <> 'ok'
ORDER BY source_id
