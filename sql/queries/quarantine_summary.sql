-- name: quarantine_summary
-- description: Quarantined rows per source, table and reason (label = the source's label in its latest run).
-- params: none
WITH labels AS (
  SELECT source_id, arg_max(label, started_at) AS label FROM ingest_runs GROUP BY source_id
)
SELECT q.source_id, l.label, q.table_name, q.reason, count(*) AS rows
FROM quarantine q LEFT JOIN labels l USING (source_id)
GROUP BY ALL
ORDER BY rows DESC, q.source_id, q.table_name, q.reason
