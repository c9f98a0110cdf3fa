-- gonka-evidence warehouse, schema version 1.
-- Storage tables (raw_*, tx_log, d_*) are internal; the public contract is the views in views.sql.

CREATE TABLE IF NOT EXISTS warehouse_meta (key VARCHAR PRIMARY KEY, value VARCHAR);

CREATE TABLE IF NOT EXISTS ingest_runs (
  run_id VARCHAR PRIMARY KEY, source_id VARCHAR NOT NULL, source_kind VARCHAR NOT NULL, label VARCHAR,
  source_display VARCHAR, copy_at TIMESTAMPTZ, started_at TIMESTAMPTZ NOT NULL, finished_at TIMESTAMPTZ,
  status VARCHAR NOT NULL, rows JSON, pipeline_version VARCHAR, schema_info JSON);
-- What each run read, as "sha256:…" (pipeline/digest.py); a column added to warehouses made before it.
ALTER TABLE ingest_runs ADD COLUMN IF NOT EXISTS input_digest VARCHAR;
-- The run's place in the order runs were made (1, 2, …): "the latest run" is the highest, whatever the
-- wall clock said (a clock set back). NULL for runs of warehouses made before it: they came first.
ALTER TABLE ingest_runs ADD COLUMN IF NOT EXISTS run_seq BIGINT;

-- One row per problem row; keyed so that re-reading the same bad row does not add it twice.
CREATE TABLE IF NOT EXISTS quarantine (
  run_id VARCHAR NOT NULL, source_id VARCHAR NOT NULL, table_name VARCHAR NOT NULL, row_key VARCHAR NOT NULL,
  reason VARCHAR NOT NULL, PRIMARY KEY (source_id, table_name, row_key));

-- The accounting identity of each run (pipeline/ingest/accounting.py): per input it read (a table of a
-- copy, a directory's files, a log's lines), rows_read = rows_used + rows_deduplicated + rows_quarantined.
CREATE TABLE IF NOT EXISTS ingest_accounting (
  run_id VARCHAR NOT NULL, source_id VARCHAR NOT NULL, input VARCHAR NOT NULL, unit VARCHAR NOT NULL,
  rows_read BIGINT NOT NULL, rows_used BIGINT NOT NULL, rows_deduplicated BIGINT NOT NULL,
  rows_quarantined BIGINT NOT NULL, note VARCHAR, PRIMARY KEY (run_id, input));

CREATE TABLE IF NOT EXISTS host_builds_t (host VARCHAR NOT NULL, build VARCHAR NOT NULL, valid_from TIMESTAMPTZ NOT NULL,
  valid_to TIMESTAMPTZ, PRIMARY KEY (host, valid_from));

-- Raw rows by natural key. Rows that change between copies are replaced by the copy that is
-- further along (its session's latest_nonce): the newest copy wins.
CREATE TABLE IF NOT EXISTS raw_sessions (
  escrow_id VARCHAR PRIMARY KEY, epoch_id BIGINT NOT NULL, version VARCHAR, creator_addr VARCHAR, config_json VARCHAR,
  group_json VARCHAR, initial_balance BIGINT, latest_nonce BIGINT, last_finalized BIGINT, status VARCHAR,
  settled_at BIGINT, imported_nonce BIGINT, source_id VARCHAR, run_id VARCHAR);

CREATE TABLE IF NOT EXISTS raw_escrow_cache (
  escrow_id VARCHAR PRIMARY KEY, epoch_id BIGINT, escrow_json VARCHAR, cached_at BIGINT);

-- Diffs are immutable: the first copy that holds a nonce writes it, later copies (any host) skip it.
CREATE TABLE IF NOT EXISTS raw_diffs (
  escrow_id VARCHAR NOT NULL, nonce BIGINT NOT NULL, epoch_id BIGINT NOT NULL, created_at BIGINT, tx_count BIGINT,
  run_id VARCHAR, PRIMARY KEY (escrow_id, nonce));

-- tx_log, d_tx_times, d_inferences and d_validations are unique on their keys by how they are written (a
-- diff's transactions once, derived rows deleted per escrow first), so they keep no key index, whose
-- upkeep was the costliest of the ingest's writes (bench/BENCHMARKS.md). Warehouses created before keep theirs.
CREATE TABLE IF NOT EXISTS tx_log (
  escrow_id VARCHAR NOT NULL, nonce BIGINT NOT NULL, tx_index BIGINT NOT NULL, epoch_id BIGINT NOT NULL,
  kind VARCHAR NOT NULL, member VARCHAR, field_number BIGINT, inference_id BIGINT, slot BIGINT, valid BOOLEAN,
  timeout_reason BIGINT, votes STRUCT(voter_slot BIGINT, accept BOOLEAN)[], model VARCHAR, input_length BIGINT,
  max_tokens BIGINT, started_at BIGINT, confirmed_at BIGINT, input_tokens BIGINT, output_tokens BIGINT,
  diff_created_at BIGINT);

CREATE TABLE IF NOT EXISTS raw_sealed_inferences (
  escrow_id VARCHAR NOT NULL, inference_id BIGINT NOT NULL, epoch_id BIGINT NOT NULL, sealed_nonce BIGINT,
  obs_present BOOLEAN, sealed_status BIGINT, sealed_executor_slot BIGINT, sealed_votes_valid BIGINT,
  sealed_votes_invalid BIGINT, sealed_validated_by BLOB, sealed_model VARCHAR, sealed_input_length BIGINT,
  sealed_max_tokens BIGINT, sealed_input_tokens BIGINT, sealed_output_tokens BIGINT, sealed_reserved_cost BIGINT,
  sealed_actual_cost BIGINT, sealed_started_at BIGINT, sealed_confirmed_at BIGINT,
  PRIMARY KEY (escrow_id, inference_id));

-- (inference, slot) pairs that applied a validation or vote, without verdicts (completeness cross-check).
CREATE TABLE IF NOT EXISTS raw_validation_obs (
  escrow_id VARCHAR NOT NULL, inference_id BIGINT NOT NULL, slot_id BIGINT NOT NULL, epoch_id BIGINT NOT NULL,
  PRIMARY KEY (escrow_id, inference_id, slot_id));

-- Derived tables, recomputed per escrow whenever an ingest touches the escrow.
CREATE TABLE IF NOT EXISTS d_escrows (
  epoch_id BIGINT, escrow_id VARCHAR PRIMARY KEY, model VARCHAR, version VARCHAR, status VARCHAR, group_size BIGINT,
  vote_threshold BIGINT, validation_rate BIGINT, creator_addr VARCHAR, settled_at TIMESTAMPTZ, latest_nonce BIGINT,
  finalize_nonce BIGINT, time_source VARCHAR);

CREATE TABLE IF NOT EXISTS d_escrow_slots (
  epoch_id BIGINT, escrow_id VARCHAR, slot_id BIGINT, address VARCHAR, address_slots BIGINT,
  PRIMARY KEY (escrow_id, slot_id));

CREATE TABLE IF NOT EXISTS d_tx_times (
  escrow_id VARCHAR, nonce BIGINT, event_at TIMESTAMPTZ);

CREATE TABLE IF NOT EXISTS d_inferences (
  epoch_id BIGINT, escrow_id VARCHAR, inference_id BIGINT, model VARCHAR, executor VARCHAR, executor_slot BIGINT,
  status VARCHAR, sealed BOOLEAN, challenged BOOLEAN, cleared BOOLEAN, finished BOOLEAN, drained BOOLEAN,
  votes_valid BIGINT, votes_invalid BIGINT, input_tokens BIGINT, output_tokens BIGINT,
  started_at TIMESTAMPTZ, confirmed_at TIMESTAMPTZ, event_at TIMESTAMPTZ, resolved_nonce BIGINT,
  sealed_nonce BIGINT, sealed_status BIGINT, in_diff_log BOOLEAN, executor_build VARCHAR);

CREATE TABLE IF NOT EXISTS d_validations (
  epoch_id BIGINT, escrow_id VARCHAR, inference_id BIGINT, nonce BIGINT, tx_index BIGINT, kind VARCHAR,
  validator VARCHAR, validator_slot BIGINT, executor VARCHAR, valid BOOLEAN, counted BOOLEAN, after_resolution BOOLEAN,
  event_at TIMESTAMPTZ, validator_build VARCHAR, executor_build VARCHAR, final_status VARCHAR,
  inference_started_at TIMESTAMPTZ);

-- Drain and miss columns added after the first release of d_inferences (older warehouse files).
ALTER TABLE d_inferences ADD COLUMN IF NOT EXISTS pre_drain_status VARCHAR;
ALTER TABLE d_inferences ADD COLUMN IF NOT EXISTS drain_outcome VARCHAR;
ALTER TABLE d_inferences ADD COLUMN IF NOT EXISTS miss_kind VARCHAR;
ALTER TABLE d_inferences ADD COLUMN IF NOT EXISTS miss_nonce BIGINT;

-- Two copies whose real seals (sealed_nonce > 0, full rows) of one inference differ. Sealed rows are
-- final once written, so such a difference is a conflict to report, never a newest-wins update.
CREATE TABLE IF NOT EXISTS raw_sealed_conflicts (
  escrow_id VARCHAR NOT NULL, inference_id BIGINT NOT NULL, epoch_id BIGINT, field VARCHAR NOT NULL,
  stored VARCHAR, copy VARCHAR, stored_source_id VARCHAR, copy_source_id VARCHAR NOT NULL, run_id VARCHAR,
  PRIMARY KEY (escrow_id, inference_id, field, copy_source_id));

-- The latest checkpoint of each escrow (snapshots.state_data decoded); the copy with the newer
-- checkpoint nonce wins. Host stats hold the slot's history before an import too.
CREATE TABLE IF NOT EXISTS raw_snapshots (
  escrow_id VARCHAR PRIMARY KEY, epoch_id BIGINT NOT NULL, snapshot_nonce BIGINT, created_at BIGINT,
  state_latest_nonce BIGINT, phase BIGINT, finalize_nonce BIGINT, balance BIGINT, fees BIGINT, token_price BIGINT,
  vote_threshold BIGINT, group_size BIGINT, live_records BIGINT, root_prefixed BOOLEAN, source_id VARCHAR);

CREATE TABLE IF NOT EXISTS raw_snapshot_host_stats (
  escrow_id VARCHAR NOT NULL, slot_id BIGINT NOT NULL, epoch_id BIGINT NOT NULL, snapshot_nonce BIGINT,
  missed BIGINT, invalid BIGINT, cost BIGINT, required_validations BIGINT, completed_validations BIGINT,
  PRIMARY KEY (escrow_id, slot_id));

-- Checkpoint columns added after the first release (older warehouse files): the blob's format, and
-- PR #1757's per-slot counters (NULL on lines without them).
ALTER TABLE raw_snapshots ADD COLUMN IF NOT EXISTS checkpoint_format VARCHAR;
ALTER TABLE raw_snapshot_host_stats ADD COLUMN IF NOT EXISTS validated BIGINT;
ALTER TABLE raw_snapshot_host_stats ADD COLUMN IF NOT EXISTS finished BIGINT;

-- Per-model rows of the checkpoint's host stats, on the line where HostStatsProto field 7 is model_stats.
CREATE TABLE IF NOT EXISTS raw_snapshot_model_stats (
  escrow_id VARCHAR NOT NULL, slot_id BIGINT NOT NULL, model VARCHAR NOT NULL, epoch_id BIGINT NOT NULL,
  snapshot_nonce BIGINT, prompt_tokens BIGINT, completion_tokens BIGINT, inference_count BIGINT, cost BIGINT,
  PRIMARY KEY (escrow_id, slot_id, model));

-- Records still live at the checkpoint (the state's inferences map).
CREATE TABLE IF NOT EXISTS raw_snapshot_live (
  escrow_id VARCHAR NOT NULL, inference_id BIGINT NOT NULL, epoch_id BIGINT NOT NULL, snapshot_nonce BIGINT,
  status BIGINT, executor_slot BIGINT, model VARCHAR, input_length BIGINT, max_tokens BIGINT, input_tokens BIGINT,
  output_tokens BIGINT, reserved_cost BIGINT, actual_cost BIGINT, started_at BIGINT, confirmed_at BIGINT,
  votes_valid BIGINT, votes_invalid BIGINT, PRIMARY KEY (escrow_id, inference_id));

-- Where the diff-log replay and the copy's sealed rows disagree (sealed rows are best-effort).
CREATE TABLE IF NOT EXISTS d_replay_disagreements (
  epoch_id BIGINT, escrow_id VARCHAR, inference_id BIGINT, field VARCHAR, replayed VARCHAR, sealed VARCHAR,
  PRIMARY KEY (escrow_id, inference_id, field));

-- Verdict rule set per devshard version, loaded with the builds file ([[devshard_versions]]).
CREATE TABLE IF NOT EXISTS devshard_version_rules_t (version VARCHAR PRIMARY KEY, rule VARCHAR NOT NULL);

-- The replay rule set each escrow's derived rows follow, and how many of its seals it reproduced
-- (pipeline/transforms/rule_sets.py).
CREATE TABLE IF NOT EXISTS d_escrow_rule_sets (
  epoch_id BIGINT, escrow_id VARCHAR PRIMARY KEY, version VARCHAR, rule_set VARCHAR NOT NULL, chosen_by VARCHAR NOT NULL,
  seals_compared BIGINT NOT NULL, seals_reproduced BIGINT NOT NULL, reproduced_by VARCHAR,
  best_rule_set VARCHAR, best_reproduced BIGINT);
