-- Inferences the host executed (executor = host, the address of the executor slot).
-- Window: --epoch on the escrow's epoch, --since/--until on started_at.
-- params: $host, $epoch, $since, $until (NULL = unbounded)
SELECT epoch_id, escrow_id, inference_id, status, sealed, finished, challenged, cleared, input_tokens, output_tokens
FROM inferences
WHERE executor = $host
  AND ($epoch::BIGINT IS NULL OR epoch_id = $epoch)
  AND ($since::TIMESTAMPTZ IS NULL OR started_at >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR started_at < $until)
