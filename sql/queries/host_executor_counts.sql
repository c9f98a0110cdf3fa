-- name: host_executor_counts
-- description: Inferences executed by one host, per epoch and status.
-- params: host (gonka1… address)
SELECT epoch_id, status, count(*) AS inferences
FROM inferences
WHERE executor = $host
GROUP BY ALL
ORDER BY epoch_id, status
