-- Per (escrow, nonce, slot) the signature whose digest sorts first, whatever order the copies came in.
-- params: $source_id (this copy)
INSERT OR REPLACE INTO raw_signature_digests BY NAME (
  SELECT n.escrow_id, n.nonce, n.slot_id, n.epoch_id, n.digest, $source_id AS source_id
  FROM new_signatures n LEFT JOIN raw_signature_digests r USING (escrow_id, nonce, slot_id)
  WHERE r.digest IS NULL OR n.digest < r.digest)
