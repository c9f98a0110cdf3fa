-- Sealed rows change in place (a live obs row is later overwritten by the real seal). Per inference the
-- row that ranks first is kept, whatever order the copies come in: a real seal over a live row, a full
-- row over a bare one, then the copy further along (its session's latest_nonce), then the source id that
-- sorts first (a seal is final: of two that conflict, the one kept does not depend on the order).
-- Real seals of two copies that differ are also recorded as conflicts (sealed_conflicts.sql).
-- params: $source_id (this copy)
INSERT OR REPLACE INTO raw_sealed_inferences BY NAME (
  WITH ranked AS (
    SELECT n.*, $source_id AS seal_source_id, s.latest_nonce AS seal_copy_nonce
    FROM new_sealed n LEFT JOIN new_sessions s USING (escrow_id)
  )
  SELECT n.* FROM ranked n
  WHERE NOT EXISTS (
    SELECT 1 FROM raw_sealed_inferences r
    WHERE r.escrow_id = n.escrow_id AND r.inference_id = n.inference_id
      AND (coalesce(r.sealed_nonce, 0) > 0, coalesce(r.obs_present, FALSE), coalesce(r.seal_copy_nonce, 0),
           r.seal_source_id IS NOT NULL AND r.seal_source_id < n.seal_source_id)
        > (coalesce(n.sealed_nonce, 0) > 0, coalesce(n.obs_present, FALSE), coalesce(n.seal_copy_nonce, 0), FALSE)))
