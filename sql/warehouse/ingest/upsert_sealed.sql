-- Sealed rows change in place (a live obs row is later overwritten by the real seal). The caller passes
-- only rows of escrows whose copy is at least as far along as the stored one, so the newest copy wins;
-- except a real seal that conflicts with the one another copy stored (raw_sealed_conflicts): a seal is
-- final, so the stored one stays and the conflict is reported instead.
-- params: $source_id (this copy)
INSERT OR REPLACE INTO raw_sealed_inferences BY NAME (
  SELECT n.* FROM new_sealed n
  WHERE NOT EXISTS (SELECT 1 FROM raw_sealed_conflicts c
                    WHERE c.escrow_id = n.escrow_id AND c.inference_id = n.inference_id
                      AND c.copy_source_id = $source_id))
