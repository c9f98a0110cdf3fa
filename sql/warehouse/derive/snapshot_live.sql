SELECT l.* FROM raw_snapshot_live l JOIN chunk_escrows USING (escrow_id)
