-- The inferences of one epoch by final status: all of them and those the host executed, each counted once.
-- Records drained at settlement are counted under `drained` only, whatever status the drain left them in (as in
-- query epoch_summary and evidence epoch-summary: a drained record is never an answer, never a miss). The final
-- statuses finished and challenged are named for what they mean at the end, finished_no_verdict and
-- challenged_unresolved: epoch-summary's finished (a finish transaction) and challenged (ever) are other counts.
-- params: $epoch, $host
SELECT CASE WHEN drained THEN 'drained'
            WHEN status = 'finished' THEN 'finished_no_verdict'
            WHEN status = 'challenged' THEN 'challenged_unresolved'
            ELSE status END AS final_status,
       count(*) AS inferences, count(*) FILTER (executor = $host) AS by_host
FROM inferences
WHERE epoch_id = $epoch
GROUP BY ALL
ORDER BY final_status
