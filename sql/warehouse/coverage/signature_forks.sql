-- Forks among this chunk's signatures (new_signatures): (escrow, nonce, slot) where this copy's
-- signature differs from the stored one, or already known as a fork; every version with its source.
-- params: $source_id (this copy), $run_id
WITH clash AS (
  SELECT n.escrow_id, n.nonce, n.slot_id FROM new_signatures n JOIN raw_signature_digests r USING (escrow_id, nonce, slot_id)
  WHERE n.digest <> r.digest
  UNION
  SELECT n.escrow_id, n.nonce, n.slot_id FROM new_signatures n JOIN raw_signature_forks f USING (escrow_id, nonce, slot_id)
)
SELECT n.escrow_id, n.nonce, n.slot_id, $source_id AS source_id, n.digest, n.epoch_id, $run_id AS run_id
FROM new_signatures n JOIN clash USING (escrow_id, nonce, slot_id)
UNION ALL
SELECT r.escrow_id, r.nonce, r.slot_id, r.source_id, r.digest, r.epoch_id, NULL AS run_id
FROM raw_signature_digests r JOIN clash USING (escrow_id, nonce, slot_id)
WHERE r.source_id <> $source_id
