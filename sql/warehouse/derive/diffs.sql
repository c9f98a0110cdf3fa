SELECT d.escrow_id, d.nonce, d.epoch_id, d.created_at FROM raw_diffs d JOIN chunk_escrows c USING (escrow_id)
