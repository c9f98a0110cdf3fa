-- The inferences of one epoch by final status: all of them and those the host executed. Records drained at
-- settlement are counted under `drained` only, whatever status the drain left them in (as in query epoch_summary
-- and evidence epoch-summary: a drained record is never an answer, never a miss).
-- params: $epoch, $host
SELECT CASE WHEN drained THEN 'drained' ELSE status END AS final_status,
       count(*) AS inferences, count(*) FILTER (executor = $host) AS by_host
FROM inferences
WHERE epoch_id = $epoch
GROUP BY ALL
ORDER BY final_status
