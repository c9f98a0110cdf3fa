-- What the warehouse found about one source's copies: seals that disagree with another copy (of
-- drained records and in all), and checkpoint slots whose host stats disagree with the log or ledger.
-- params: $source_id
SELECT
  (SELECT count(DISTINCT (c.escrow_id, c.inference_id)) FROM raw_sealed_conflicts c
   WHERE $source_id IN (c.copy_source_id, c.stored_source_id)) AS seal_conflicts,
  (SELECT count(DISTINCT (c.escrow_id, c.inference_id)) FROM raw_sealed_conflicts c
   JOIN d_inferences i USING (escrow_id, inference_id)
   WHERE i.drained AND $source_id IN (c.copy_source_id, c.stored_source_id)) AS drained_conflicts,
  (SELECT count(*) FROM snapshot_host_stats_disagreements d JOIN raw_snapshots s USING (escrow_id)
   WHERE s.source_id = $source_id) AS snapshot_disagreements
