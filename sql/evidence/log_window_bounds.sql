-- The time range of an epoch for log-based evidence (logs carry times, not epochs): from the
-- first to just past the last event of the epoch's inferences. params: $epoch
SELECT min(least(started_at, event_at)) AS since, max(greatest(confirmed_at, event_at)) + INTERVAL 1 SECOND AS until
FROM inferences WHERE epoch_id = $epoch
