-- The network's verdicts for the preflight's replay check: every other validator's verdicts on answers executed
-- by neither that validator nor the host, one per transaction. Window as host_verdict_counts.sql (--epoch on the
-- escrow's epoch, --since/--until on event_at). params: $host, $epoch, $since, $until (NULL = unbounded)
SELECT count(*) FILTER (valid) AS valid,
       count(*) FILTER (NOT valid) AS invalid
FROM validations
WHERE validator <> $host
  AND executor IS DISTINCT FROM validator
  AND executor IS DISTINCT FROM $host
  AND ($epoch::BIGINT IS NULL OR epoch_id = $epoch)
  AND ($since::TIMESTAMPTZ IS NULL OR event_at >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR event_at < $until)
