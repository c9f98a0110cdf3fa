-- Each escrow's latest checkpoint: its finalize nonce (0 = not finalized, stored as NULL) and phase
-- (0 Active, 1 Finalizing, 2 Settlement).
SELECT p.escrow_id, p.finalize_nonce AS checkpoint_finalize_nonce, p.phase AS checkpoint_phase
FROM raw_snapshots p JOIN chunk_escrows USING (escrow_id)
