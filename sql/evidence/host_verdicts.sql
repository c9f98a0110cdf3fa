-- Every verdict the host cast on another host's answer, one row per transaction
-- (the validations view has one row per validation/vote transaction, so an address
-- with several slots gives one verdict, not one per slot), with the inference's
-- final status. Window: --epoch on the escrow's epoch, --since/--until on event_at.
-- params: $host, $epoch, $since, $until (NULL = unbounded)
SELECT v.epoch_id, v.escrow_id, v.inference_id, v.kind, v.valid, v.event_at,
       coalesce(v.validator_build, 'unattributed') AS build,
       i.status AS final_status
FROM validations v
LEFT JOIN inferences i USING (escrow_id, inference_id)
WHERE v.validator = $host
  AND v.executor IS DISTINCT FROM $host
  AND ($epoch::BIGINT IS NULL OR v.epoch_id = $epoch)
  AND ($since::TIMESTAMPTZ IS NULL OR v.event_at >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR v.event_at < $until)
