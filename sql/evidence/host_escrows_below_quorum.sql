-- Settled escrows the host holds a slot of whose settlement signatures come from fewer distinct validators than
-- the slot quorum (escrow_signers; gonka-ai/gonka #1356). Window: --epoch on the escrow's epoch, --since/--until
-- on settled_at. params: $host, $epoch, $since, $until (NULL = unbounded)
SELECT s.epoch_id, s.escrow_id, s.signing_slots, s.distinct_signers, s.quorum
FROM escrow_signers s JOIN escrows e USING (escrow_id)
WHERE s.status = 'settled' AND s.below_distinct_quorum
  AND EXISTS (SELECT 1 FROM escrow_slots g WHERE g.escrow_id = s.escrow_id AND g.address = $host)
  AND ($epoch::BIGINT IS NULL OR s.epoch_id = $epoch)
  AND ($since::TIMESTAMPTZ IS NULL OR e.settled_at >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR e.settled_at < $until)
ORDER BY s.epoch_id, s.escrow_id
