SELECT s.* FROM raw_sealed_inferences s JOIN chunk_escrows c USING (escrow_id)
