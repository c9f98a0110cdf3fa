-- Accounting ledger ("the tracker"), saved API / chain JSON, and stored-answer checks (docs/data-model.md).
-- Storage tables are internal; the public contract is the views in views/20_tracker.sql.

-- One row per escrow of a ledger copy (newest copy wins: a copy further along replaces the escrow's rows).
CREATE TABLE IF NOT EXISTS ledger_escrows (
  escrow_id VARCHAR PRIMARY KEY, epoch_id BIGINT, model VARCHAR, group_size BIGINT, phase VARCHAR,
  phase_rank BIGINT, latest_nonce BIGINT, schema_version BIGINT, layout VARCHAR, source_id VARCHAR, run_id VARCHAR);

CREATE TABLE IF NOT EXISTS ledger_slots (
  escrow_id VARCHAR NOT NULL, slot_id BIGINT NOT NULL, address VARCHAR, PRIMARY KEY (escrow_id, slot_id));

-- Counters already summed across writers; counter_key parsed as a map (known fields as columns,
-- the raw JSON in key_json, unknown fields in extra_keys).
CREATE TABLE IF NOT EXISTS ledger_counters (
  escrow_id VARCHAR NOT NULL, counter_id VARCHAR NOT NULL, slot_id BIGINT, disposition VARCHAR, phase VARCHAR,
  warmup BOOLEAN, timeout_kind VARCHAR, timeout_outcome VARCHAR, timeout_reason VARCHAR, failure_origin VARCHAR,
  no_send_reason VARCHAR, quarantine_mode VARCHAR, detail_reason VARCHAR, delivery_reason VARCHAR,
  terminal VARCHAR, ghost_reason VARCHAR, slow_receipt BOOLEAN, slow_chunk BOOLEAN, clock_drifted BOOLEAN,
  slow_decode BOOLEAN, logprobs_decoded BOOLEAN, count BIGINT, key_json VARCHAR, extra_keys VARCHAR,
  schema_version BIGINT, PRIMARY KEY (escrow_id, counter_id));

CREATE TABLE IF NOT EXISTS ledger_host_stats (
  escrow_id VARCHAR NOT NULL, slot_id BIGINT NOT NULL, missed BIGINT, invalid BIGINT, cost BIGINT,
  required_validations BIGINT, completed_validations BIGINT, PRIMARY KEY (escrow_id, slot_id));
-- PR #1757's counters (NULL on ledgers without them); the copy further along wins the whole escrow,
-- so they follow the latest nonce, never GREATEST (validated can decrease).
ALTER TABLE ledger_host_stats ADD COLUMN IF NOT EXISTS protocol_validated BIGINT;
ALTER TABLE ledger_host_stats ADD COLUMN IF NOT EXISTS protocol_finished BIGINT;

-- Set tables counted per slot, legacy baseline added, slot −1 dedup rows left out.
CREATE TABLE IF NOT EXISTS ledger_slot_sets (
  escrow_id VARCHAR NOT NULL, slot_id BIGINT NOT NULL, protocol_nonces BIGINT, challenges BIGINT,
  open_challenges BIGINT, invalid_transitions BIGINT, PRIMARY KEY (escrow_id, slot_id));

-- Saved accounting-API responses (per-participant records) and their counters.
CREATE TABLE IF NOT EXISTS api_participants (
  epoch_id BIGINT NOT NULL, participant VARCHAR NOT NULL, model VARCHAR NOT NULL, schema_version BIGINT,
  assigned_nonces BIGINT, protocol_only BIGINT, protocol_misses BIGINT, protocol_invalid BIGINT,
  unresolved_challenges BIGINT, recorded_invalid_transitions BIGINT, dispositions JSON, extra JSON,
  source_id VARCHAR, run_id VARCHAR, PRIMARY KEY (epoch_id, participant, model));

CREATE TABLE IF NOT EXISTS api_counters (
  epoch_id BIGINT NOT NULL, participant VARCHAR NOT NULL, model VARCHAR NOT NULL, escrow_id VARCHAR NOT NULL,
  counter_id VARCHAR NOT NULL, slot_id BIGINT, disposition VARCHAR, phase VARCHAR, warmup BOOLEAN,
  timeout_kind VARCHAR, timeout_outcome VARCHAR, timeout_reason VARCHAR, failure_origin VARCHAR,
  no_send_reason VARCHAR, quarantine_mode VARCHAR, detail_reason VARCHAR, delivery_reason VARCHAR,
  terminal VARCHAR, ghost_reason VARCHAR, slow_receipt BOOLEAN, slow_chunk BOOLEAN, clock_drifted BOOLEAN,
  slow_decode BOOLEAN, logprobs_decoded BOOLEAN, count BIGINT, key_json VARCHAR, extra_keys VARCHAR,
  schema_version BIGINT, PRIMARY KEY (epoch_id, participant, model, escrow_id, counter_id));

-- Chain REST statistics per participant and epoch (uint64 strings and Decimal{value, exponent} decoded).
CREATE TABLE IF NOT EXISTS chain_participant_stats (
  epoch_id BIGINT NOT NULL, participant VARCHAR NOT NULL, kind VARCHAR NOT NULL, inference_count BIGINT,
  missed_requests BIGINT, validated_inferences BIGINT, invalidated_inferences BIGINT, earned_coins BIGINT,
  rewarded_coins BIGINT, burned_coins BIGINT, claimed BOOLEAN, missed BIGINT, invalid BIGINT, cost BIGINT,
  required_validations BIGINT, completed_validations BIGINT, escrow_count BIGINT, invalid_llr DOUBLE,
  inactive_llr DOUBLE, confirmation_poc_ratio DOUBLE, query_height BIGINT, source_id VARCHAR, run_id VARCHAR,
  PRIMARY KEY (epoch_id, participant, kind));

-- One row per stored answer: the fields the evidence needs, never the bodies (prompt and response bodies stay out of the warehouse).
CREATE TABLE IF NOT EXISTS answer_checks_t (
  epoch_id BIGINT NOT NULL, escrow_id VARCHAR NOT NULL, inference_id BIGINT NOT NULL, model VARCHAR,
  temperature DOUBLE, top_p DOUBLE, temperature_given BOOLEAN, top_p_given BOOLEAN, max_tokens BIGINT,
  logprobs_requested BOOLEAN, top_logprobs BIGINT, stream_requested BOOLEAN, prompt_tokens BIGINT,
  completion_tokens BIGINT, logprob_tokens BIGINT, duplicate_top_logprob_positions BIGINT, nan_logprobs BIGINT,
  missing_logprobs BIGINT, tokens_not_ids BIGINT, empty BOOLEAN, sse BOOLEAN, complete BOOLEAN,
  response_bytes BIGINT, problem VARCHAR, source_id VARCHAR, run_id VARCHAR,
  PRIMARY KEY (escrow_id, inference_id));
-- Where the answer was stored: postgres (payload_storage), json or json_zst (a payload file).
ALTER TABLE answer_checks_t ADD COLUMN IF NOT EXISTS payload_format VARCHAR;
-- The client's values of the parameters devshardd injects before execution (the stored request is the client's):
-- seed given, min_tokens, logprobs_mode.
ALTER TABLE answer_checks_t ADD COLUMN IF NOT EXISTS seed_given BOOLEAN;
ALTER TABLE answer_checks_t ADD COLUMN IF NOT EXISTS min_tokens BIGINT;
ALTER TABLE answer_checks_t ADD COLUMN IF NOT EXISTS logprobs_mode VARCHAR;
