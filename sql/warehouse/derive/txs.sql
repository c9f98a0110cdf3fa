SELECT t.* FROM tx_log t JOIN chunk_escrows c USING (escrow_id)
