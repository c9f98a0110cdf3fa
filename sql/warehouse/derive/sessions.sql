SELECT s.* FROM raw_sessions s JOIN chunk_escrows c USING (escrow_id)
