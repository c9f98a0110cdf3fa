-- The checkpoints of a chunk that the upsert will write: new escrows, or a checkpoint nonce at least the stored one.
SELECT count(*) FROM new_snapshots n LEFT JOIN raw_snapshots r USING (escrow_id)
WHERE r.escrow_id IS NULL OR n.snapshot_nonce >= r.snapshot_nonce
