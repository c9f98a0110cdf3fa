-- Real seals (sealed_nonce > 0, full rows) of this copy that differ from the stored ones of another copy.
-- Rows without obs_present (the old 3-column table) are bare: nothing to compare.
-- A seal is final once written, so every hosts' copy of one escrow must hold the same one. Each conflict
-- is written as the kept row (stored, the one that ranks first in upsert_sealed.sql) against the other
-- (copy), so that the same two copies give the same row in either order.
-- params: $source_id (this copy), $run_id
WITH pairs AS (
  SELECT n.escrow_id, n.inference_id, n.epoch_id,
         coalesce(r.seal_source_id, s.source_id) AS stored_source_id,
         (coalesce(r.seal_copy_nonce, 0), coalesce(r.seal_source_id, s.source_id) < $source_id)
           > (coalesce(c.latest_nonce, 0), FALSE) AS stored_kept,
         r.sealed_status AS stored_status, n.sealed_status AS copy_status,
         r.sealed_actual_cost AS stored_cost, n.sealed_actual_cost AS copy_cost
  FROM new_sealed n
  JOIN raw_sealed_inferences r USING (escrow_id, inference_id)
  JOIN raw_sessions s USING (escrow_id)
  LEFT JOIN new_sessions c USING (escrow_id)
  WHERE n.sealed_nonce > 0 AND r.sealed_nonce > 0 AND coalesce(n.obs_present, FALSE) AND coalesce(r.obs_present, FALSE)
    AND coalesce(r.seal_source_id, s.source_id) IS DISTINCT FROM $source_id
)
SELECT escrow_id, inference_id, epoch_id, u.field,
       CASE WHEN stored_kept THEN u.stored ELSE u.copy END AS stored,
       CASE WHEN stored_kept THEN u.copy ELSE u.stored END AS copy,
       CASE WHEN stored_kept THEN stored_source_id ELSE $source_id END AS stored_source_id,
       CASE WHEN stored_kept THEN $source_id ELSE stored_source_id END AS copy_source_id,
       $run_id AS run_id
FROM pairs
CROSS JOIN UNNEST([
  {'field': 'sealed_status', 'stored': stored_status::VARCHAR, 'copy': copy_status::VARCHAR},
  {'field': 'sealed_actual_cost', 'stored': stored_cost::VARCHAR, 'copy': copy_cost::VARCHAR}
]) AS t(u)
WHERE u.stored IS DISTINCT FROM u.copy
