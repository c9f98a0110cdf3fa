-- Every answer in the escrows where the host executed at least one answer in the window, with its
-- start time: the host's and every other executor's, as in peer_answers.sql (an answer is an
-- inference with a finish transaction whose final status is not timed_out).
-- Window: --epoch on the escrow's epoch, --since/--until on started_at.
-- params: $host, $epoch, $since, $until (NULL = unbounded)
WITH answers AS (
  SELECT escrow_id, executor, started_at,
         challenged OR status = 'invalidated' AS challenged_or_invalidated
  FROM inferences
  WHERE finished AND status <> 'timed_out'
    AND ($epoch::BIGINT IS NULL OR epoch_id = $epoch)
    AND ($since::TIMESTAMPTZ IS NULL OR started_at >= $since)
    AND ($until::TIMESTAMPTZ IS NULL OR started_at < $until)
)
SELECT started_at AS "at", executor IS NOT DISTINCT FROM $host AS is_host, challenged_or_invalidated
FROM answers
WHERE escrow_id IN (SELECT escrow_id FROM answers WHERE executor = $host)
