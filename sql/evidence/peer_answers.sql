-- Answers per escrow, host vs every other executor, in the escrows where the host executed at
-- least one answer in the window; with $control, host vs that one executor, in the escrows where
-- both executed at least one answer. An answer is an inference with a finish transaction whose final status
-- is not timed_out (records drained to Finished at settlement have no finish transaction).
-- host_build: the host's build in force at the answer's event time (for every executor's answer, so
-- that others are compared with the host while it ran that build); 'unattributed' outside the timeline.
-- Window: --epoch on the escrow's epoch, --since/--until on started_at.
-- params: $host, $control, $epoch, $since, $until (NULL = unbounded; $control NULL = every other executor)
WITH answers AS (
  SELECT epoch_id, escrow_id, inference_id, executor, event_at,
         challenged OR status = 'invalidated' AS challenged_or_invalidated
  FROM inferences
  WHERE finished AND status <> 'timed_out'
    AND ($epoch::BIGINT IS NULL OR epoch_id = $epoch)
    AND ($since::TIMESTAMPTZ IS NULL OR started_at >= $since)
    AND ($until::TIMESTAMPTZ IS NULL OR started_at < $until)
)
SELECT epoch_id, escrow_id, executor IS NOT DISTINCT FROM $host AS is_host,
       coalesce((SELECT b.build FROM host_builds b
                 WHERE b.host = $host AND event_at >= b.valid_from AND (b.valid_to IS NULL OR event_at < b.valid_to)),
                'unattributed') AS host_build,
       count(*) AS answers, count(*) FILTER (challenged_or_invalidated) AS challenged_or_invalidated
FROM answers
WHERE escrow_id IN (SELECT escrow_id FROM answers WHERE executor = $host)
  AND ($control::VARCHAR IS NULL OR (executor IN ($host, $control)
       AND escrow_id IN (SELECT escrow_id FROM answers WHERE executor = $control)))
GROUP BY ALL
