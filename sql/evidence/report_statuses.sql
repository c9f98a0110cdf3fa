-- The inferences of one epoch by final status: all of them and those the host executed.
-- params: $epoch, $host
SELECT status, count(*) AS inferences, count(*) FILTER (executor = $host) AS by_host
FROM inferences
WHERE epoch_id = $epoch
GROUP BY ALL
ORDER BY status
