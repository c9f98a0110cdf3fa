-- The epochs whose escrows a time window covers: of the inferences started and the verdicts cast in
-- [$since, $until) (the two clocks evidence tables window on).
-- params: $since, $until
SELECT epoch_id FROM inferences WHERE started_at >= $since AND started_at < $until
UNION SELECT epoch_id FROM validations WHERE event_at >= $since AND event_at < $until
ORDER BY epoch_id
