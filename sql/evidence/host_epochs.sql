-- Epochs in which the host holds at least one slot of an escrow.
-- params: $host, $epoch (NULL = every epoch)
SELECT DISTINCT epoch_id
FROM escrow_slots
WHERE address = $host
  AND ($epoch::BIGINT IS NULL OR epoch_id = $epoch)
ORDER BY epoch_id
