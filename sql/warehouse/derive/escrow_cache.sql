SELECT x.escrow_id, x.escrow_json FROM raw_escrow_cache x JOIN chunk_escrows c USING (escrow_id)
