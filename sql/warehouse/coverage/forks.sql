-- Forks among this chunk's diffs: nonces where this copy's bytes differ from the stored diff's, and
-- nonces already known as forks. Every version with its source: this copy's, and the stored one
-- with the source of the run that stored it (INSERT OR IGNORE INTO raw_diff_forks).
-- params: $source_id (this copy), $run_id
WITH clash AS (
  SELECT n.escrow_id, n.nonce FROM new_diffs n JOIN raw_diffs r USING (escrow_id, nonce) WHERE n.digest <> r.digest
  UNION
  SELECT n.escrow_id, n.nonce FROM new_diffs n JOIN raw_diff_forks f USING (escrow_id, nonce)
)
SELECT n.escrow_id, n.nonce, $source_id AS source_id, n.digest, n.epoch_id, n.created_at, $run_id AS run_id
FROM new_diffs n JOIN clash USING (escrow_id, nonce)
UNION ALL
SELECT r.escrow_id, r.nonce, i.source_id, r.digest, r.epoch_id, r.created_at, r.run_id
FROM raw_diffs r JOIN clash USING (escrow_id, nonce) JOIN ingest_runs i USING (run_id)
WHERE r.digest IS NOT NULL AND i.source_id <> $source_id
