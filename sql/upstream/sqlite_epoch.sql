-- Upstream SQLite layout: <storeDir>/epoch_<N>.db (docs/sources.md, SQLite layout), newest build.
-- No table carries epoch_id: the epoch is N from the file name.
CREATE TABLE IF NOT EXISTS schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE IF NOT EXISTS sessions (
  escrow_id TEXT PRIMARY KEY, version TEXT, creator_addr TEXT NOT NULL, config_json TEXT NOT NULL,
  group_json TEXT NOT NULL, initial_balance INTEGER NOT NULL, latest_nonce INTEGER DEFAULT 0,
  last_finalized INTEGER DEFAULT 0, status TEXT DEFAULT 'active', settled_at INTEGER, imported_nonce INTEGER);
CREATE TABLE IF NOT EXISTS diffs (
  escrow_id TEXT, nonce INTEGER, txs_proto BLOB NOT NULL, user_sig BLOB, post_state_root BLOB,
  state_hash BLOB, warm_keys_json TEXT, created_at INTEGER DEFAULT 0, PRIMARY KEY (escrow_id, nonce));
CREATE TABLE IF NOT EXISTS signatures (
  escrow_id TEXT, nonce INTEGER, slot_id INTEGER, sig BLOB NOT NULL, PRIMARY KEY (escrow_id, nonce, slot_id));
CREATE TABLE IF NOT EXISTS snapshots (
  escrow_id TEXT PRIMARY KEY, nonce INTEGER, state_data BLOB NOT NULL, created_at INTEGER);
CREATE TABLE IF NOT EXISTS sealed_inferences (
  escrow_id TEXT, inference_id INTEGER, sealed_nonce INTEGER NOT NULL, obs_present INTEGER DEFAULT 1,
  sealed_status INTEGER DEFAULT 0, sealed_executor_slot INTEGER DEFAULT 0,
  sealed_votes_valid INTEGER DEFAULT 0, sealed_votes_invalid INTEGER DEFAULT 0, sealed_validated_by BLOB,
  sealed_model TEXT DEFAULT '', sealed_prompt_hash BLOB, sealed_response_hash BLOB,
  sealed_input_length INTEGER DEFAULT 0, sealed_max_tokens INTEGER DEFAULT 0,
  sealed_input_tokens INTEGER DEFAULT 0, sealed_output_tokens INTEGER DEFAULT 0,
  sealed_reserved_cost INTEGER DEFAULT 0, sealed_actual_cost INTEGER DEFAULT 0,
  sealed_started_at INTEGER DEFAULT 0, sealed_confirmed_at INTEGER DEFAULT 0,
  PRIMARY KEY (escrow_id, inference_id));
CREATE TABLE IF NOT EXISTS slot_validation_obs (
  escrow_id TEXT, slot_id INTEGER, required_validations INTEGER, completed_validations INTEGER, PRIMARY KEY (escrow_id, slot_id));
CREATE TABLE IF NOT EXISTS inference_validation_obs (
  escrow_id TEXT, inference_id INTEGER, slot_id INTEGER, required_validations INTEGER, completed_validations INTEGER,
  PRIMARY KEY (escrow_id, inference_id, slot_id));
CREATE TABLE IF NOT EXISTS sealed_validation_obs (
  escrow_id TEXT, inference_id INTEGER, slot_id INTEGER, required_validations INTEGER, completed_validations INTEGER,
  PRIMARY KEY (escrow_id, inference_id, slot_id));
