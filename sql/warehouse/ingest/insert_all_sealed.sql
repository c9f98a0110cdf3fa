-- upsert_sealed.sql when the warehouse holds no sealed row of the chunk's escrows (sealed_held.sql): nothing
-- to rank against, so a plain INSERT of the same rows. params: $source_id (this copy)
INSERT INTO raw_sealed_inferences BY NAME (
  SELECT n.*, $source_id AS seal_source_id, s.latest_nonce AS seal_copy_nonce
  FROM new_sealed n LEFT JOIN new_sessions s USING (escrow_id))
