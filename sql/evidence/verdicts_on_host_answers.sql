-- Every verdict (one row per validation or vote transaction) on inferences the host
-- executed, selected by the same window as host_answers.sql (on the inference's started_at).
-- params: $host, $epoch, $since, $until (NULL = unbounded)
SELECT v.epoch_id, v.escrow_id, v.inference_id, v.kind, v.valid
FROM validations v
JOIN inferences i USING (escrow_id, inference_id)
WHERE i.executor = $host
  AND ($epoch::BIGINT IS NULL OR i.epoch_id = $epoch)
  AND ($since::TIMESTAMPTZ IS NULL OR i.started_at >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR i.started_at < $until)
