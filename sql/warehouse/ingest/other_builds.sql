-- What builds other than the newest left in one copy, for the ingest's summary line: checkpoints written
-- as JSON (pre-devshard-v2), escrows whose checkpoint carries PR #1757's counters or per-model host
-- stats, answers read from zstd payload files, and verdicts cast by the executor's own address.
-- params: $source_id
WITH escrows AS (SELECT escrow_id FROM raw_sessions WHERE source_id = $source_id)
SELECT
  (SELECT count(*) FROM raw_snapshots WHERE source_id = $source_id AND checkpoint_format = 'json') AS json_checkpoints,
  (SELECT count(DISTINCT escrow_id) FROM raw_snapshot_host_stats
   WHERE validated IS NOT NULL AND escrow_id IN (SELECT escrow_id FROM escrows)) AS counter_escrows,
  (SELECT count(DISTINCT escrow_id) FROM raw_snapshot_model_stats
   WHERE escrow_id IN (SELECT escrow_id FROM escrows)) AS model_stats_escrows,
  (SELECT count(*) FROM answer_checks_t WHERE source_id = $source_id AND payload_format = 'json_zst') AS zst_payloads,
  (SELECT count(*) FROM d_validations
   WHERE validator = executor AND escrow_id IN (SELECT escrow_id FROM escrows)) AS self_verdicts
