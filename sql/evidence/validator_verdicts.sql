-- Verdicts (one per validation or vote transaction) on the answers the host executed, per validator
-- address and the validator's build at the verdict (the as-of join of host_builds on event_at; NULL
-- when no entry of the validator covers it). agreed / resolved compare each verdict with the judged
-- inference's final validated or invalidated status.
-- Window: as epoch-summary, on the judged inference (--epoch on its epoch, --since/--until on its started_at).
-- params: $host, $epoch, $since, $until (NULL = unbounded)
SELECT validator, validator_build AS build,
       count(*) FILTER (kind = 'validation') AS validations,
       count(*) FILTER (kind = 'vote') AS votes,
       count(*) AS verdicts,
       count(*) FILTER (NOT valid) AS invalid,
       count(*) FILTER (self_verdict) AS self_verdicts,  -- the validator is the executor's own address
       count(*) FILTER (final_status IN ('validated', 'invalidated')) AS resolved,
       count(*) FILTER ((valid AND final_status = 'validated') OR (NOT valid AND final_status = 'invalidated')) AS agreed,
       min(event_at) AS first_at
FROM validations
WHERE executor = $host
  AND final_status IS NOT NULL  -- the judged inference is in the warehouse
  AND ($epoch::BIGINT IS NULL OR epoch_id = $epoch)
  AND ($since::TIMESTAMPTZ IS NULL OR inference_started_at >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR inference_started_at < $until)
GROUP BY ALL
