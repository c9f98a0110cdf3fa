-- The host's executed inferences counted per epoch (definitions: pipeline/evidence/epoch_summary.py).
-- Window: --epoch on the escrow's epoch, --since/--until on started_at.
-- params: $host, $epoch, $since, $until (NULL = unbounded)
SELECT epoch_id,
       count(*) FILTER (sealed) AS sealed,
       count(*) FILTER (finished) AS finished,
       count(*) FILTER (status = 'validated') AS validated,
       count(*) FILTER (status = 'invalidated') AS invalidated,
       count(*) FILTER (status = 'timed_out' AND NOT drained) AS timed_out,
       count(*) FILTER (drained) AS drained,
       count(*) FILTER (challenged) AS challenged,
       count(*) FILTER (cleared) AS cleared,
       coalesce(sum(input_tokens) FILTER (finished), 0) AS input_tokens,
       coalesce(sum(output_tokens) FILTER (finished), 0) AS output_tokens
FROM inferences
WHERE executor = $host
  AND ($epoch::BIGINT IS NULL OR epoch_id = $epoch)
  AND ($since::TIMESTAMPTZ IS NULL OR started_at >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR started_at < $until)
GROUP BY epoch_id
