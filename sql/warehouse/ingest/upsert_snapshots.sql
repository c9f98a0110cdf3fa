-- The latest checkpoint per escrow: a copy's snapshot replaces the stored one unless the stored one
-- has a newer checkpoint nonce (at the same nonce, the source id that sorts first: any order of copies gives
-- the same one); its host stats, model rows and live records go with it.
CREATE OR REPLACE TEMP TABLE winning_snapshots AS
SELECT n.escrow_id FROM new_snapshots n LEFT JOIN raw_snapshots r USING (escrow_id)
WHERE r.escrow_id IS NULL
   OR (n.snapshot_nonce, r.source_id IS NULL OR n.source_id <= r.source_id) >= (r.snapshot_nonce, TRUE);
DELETE FROM raw_snapshot_host_stats WHERE escrow_id IN (SELECT escrow_id FROM winning_snapshots);
DELETE FROM raw_snapshot_model_stats WHERE escrow_id IN (SELECT escrow_id FROM winning_snapshots);
DELETE FROM raw_snapshot_live WHERE escrow_id IN (SELECT escrow_id FROM winning_snapshots);
INSERT OR REPLACE INTO raw_snapshots BY NAME (
  SELECT n.* FROM new_snapshots n JOIN winning_snapshots USING (escrow_id));
INSERT INTO raw_snapshot_host_stats BY NAME (
  SELECT n.* FROM new_snapshot_host_stats n JOIN winning_snapshots USING (escrow_id));
INSERT INTO raw_snapshot_model_stats BY NAME (  -- a model listed twice for one slot is summed
  SELECT n.escrow_id, n.slot_id, n.model, any_value(n.epoch_id) AS epoch_id, any_value(n.snapshot_nonce) AS snapshot_nonce,
         sum(n.prompt_tokens)::BIGINT AS prompt_tokens, sum(n.completion_tokens)::BIGINT AS completion_tokens,
         sum(n.inference_count)::BIGINT AS inference_count, sum(n.cost)::BIGINT AS cost
  FROM new_snapshot_model_stats n JOIN winning_snapshots USING (escrow_id) GROUP BY ALL);
INSERT INTO raw_snapshot_live BY NAME (
  SELECT n.* FROM new_snapshot_live n JOIN winning_snapshots USING (escrow_id));
DROP TABLE winning_snapshots;
