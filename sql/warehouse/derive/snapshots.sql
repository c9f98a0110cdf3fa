-- The finalize nonce each escrow's latest checkpoint holds (0 = not finalized, stored as NULL).
SELECT p.escrow_id, p.finalize_nonce AS checkpoint_finalize_nonce FROM raw_snapshots p JOIN chunk_escrows USING (escrow_id)
