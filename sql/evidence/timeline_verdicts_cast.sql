-- Verdicts the host cast on other hosts' answers with their time, selected as in
-- host_verdict_counts.sql (one per transaction). Window: --epoch on the escrow's epoch,
-- --since/--until on event_at.
-- params: $host, $epoch, $since, $until (NULL = unbounded)
SELECT event_at AS "at", valid
FROM validations
WHERE validator = $host
  AND executor IS DISTINCT FROM $host
  AND ($epoch::BIGINT IS NULL OR epoch_id = $epoch)
  AND ($since::TIMESTAMPTZ IS NULL OR event_at >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR event_at < $until)
