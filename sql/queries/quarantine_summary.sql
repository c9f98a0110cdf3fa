-- name: quarantine_summary
-- description: Quarantined rows per source, table and reason.
-- params: none
SELECT source_id, table_name, reason, count(*) AS rows
FROM quarantine
GROUP BY ALL
ORDER BY rows DESC
