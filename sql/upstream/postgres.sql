-- Upstream PostgreSQL layout (docs/sources.md, PostgreSQL layout), newest build. Sample generator only.
-- Partitioned tables get children <parent>_epoch_<N> from the generator (FOR VALUES FROM (N) TO (N+1)).
CREATE TABLE IF NOT EXISTS schema_migrations (id INT PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMP DEFAULT now());
CREATE TABLE IF NOT EXISTS devshard_session_index (escrow_id TEXT PRIMARY KEY, epoch_id BIGINT NOT NULL);
CREATE INDEX IF NOT EXISTS devshard_session_index_epoch ON devshard_session_index (epoch_id);
CREATE TABLE IF NOT EXISTS devshard_sessions (
  epoch_id BIGINT NOT NULL, escrow_id TEXT NOT NULL, version TEXT, creator_addr TEXT NOT NULL, config_json TEXT NOT NULL,
  group_json TEXT NOT NULL, initial_balance BIGINT NOT NULL, latest_nonce BIGINT DEFAULT 0, last_finalized BIGINT DEFAULT 0,
  settled_at BIGINT, status TEXT DEFAULT 'active', imported_nonce BIGINT,
  PRIMARY KEY (epoch_id, escrow_id)) PARTITION BY RANGE (epoch_id);
CREATE TABLE IF NOT EXISTS devshard_diffs (
  epoch_id BIGINT NOT NULL, escrow_id TEXT NOT NULL, nonce BIGINT NOT NULL, txs_proto BYTEA NOT NULL, user_sig BYTEA,
  post_state_root BYTEA, state_hash BYTEA, warm_keys_json TEXT, created_at BIGINT DEFAULT 0,
  PRIMARY KEY (epoch_id, escrow_id, nonce)) PARTITION BY RANGE (epoch_id);
CREATE TABLE IF NOT EXISTS devshard_signatures (
  epoch_id BIGINT NOT NULL, escrow_id TEXT NOT NULL, nonce BIGINT NOT NULL, slot_id BIGINT NOT NULL, sig BYTEA,
  PRIMARY KEY (epoch_id, escrow_id, nonce, slot_id)) PARTITION BY RANGE (epoch_id);
CREATE TABLE IF NOT EXISTS devshard_snapshots (
  epoch_id BIGINT NOT NULL, escrow_id TEXT NOT NULL, nonce BIGINT, state_data BYTEA, created_at BIGINT,
  PRIMARY KEY (epoch_id, escrow_id)) PARTITION BY RANGE (epoch_id);
CREATE TABLE IF NOT EXISTS devshard_sealed_inferences (
  epoch_id BIGINT NOT NULL, escrow_id TEXT NOT NULL, inference_id BIGINT NOT NULL, sealed_nonce BIGINT NOT NULL,
  obs_present BOOLEAN DEFAULT true, sealed_status INTEGER DEFAULT 0, sealed_executor_slot INTEGER DEFAULT 0,
  sealed_votes_valid INTEGER DEFAULT 0, sealed_votes_invalid INTEGER DEFAULT 0, sealed_validated_by BYTEA,
  sealed_model TEXT DEFAULT '', sealed_prompt_hash BYTEA, sealed_response_hash BYTEA,
  sealed_input_length BIGINT DEFAULT 0, sealed_max_tokens BIGINT DEFAULT 0,
  sealed_input_tokens BIGINT DEFAULT 0, sealed_output_tokens BIGINT DEFAULT 0,
  sealed_reserved_cost BIGINT DEFAULT 0, sealed_actual_cost BIGINT DEFAULT 0,
  sealed_started_at BIGINT DEFAULT 0, sealed_confirmed_at BIGINT DEFAULT 0,
  PRIMARY KEY (epoch_id, escrow_id, inference_id)) PARTITION BY RANGE (epoch_id);
CREATE TABLE IF NOT EXISTS devshard_slot_validation_obs (
  epoch_id BIGINT NOT NULL, escrow_id TEXT NOT NULL, slot_id INTEGER NOT NULL, required_validations INTEGER, completed_validations INTEGER,
  PRIMARY KEY (epoch_id, escrow_id, slot_id)) PARTITION BY RANGE (epoch_id);
CREATE TABLE IF NOT EXISTS devshard_inference_validation_obs (
  epoch_id BIGINT NOT NULL, escrow_id TEXT NOT NULL, inference_id BIGINT NOT NULL, slot_id INTEGER NOT NULL,
  required_validations INTEGER, completed_validations INTEGER,
  PRIMARY KEY (epoch_id, escrow_id, inference_id, slot_id)) PARTITION BY RANGE (epoch_id);
CREATE TABLE IF NOT EXISTS devshard_sealed_validation_obs (
  epoch_id BIGINT NOT NULL, escrow_id TEXT NOT NULL, inference_id BIGINT NOT NULL, slot_id INTEGER NOT NULL,
  required_validations INTEGER, completed_validations INTEGER,
  PRIMARY KEY (epoch_id, escrow_id, inference_id, slot_id)) PARTITION BY RANGE (epoch_id);
CREATE TABLE IF NOT EXISTS devshard_validation_leases (
  epoch_id BIGINT NOT NULL, escrow_id TEXT NOT NULL, inference_id BIGINT NOT NULL, instance_address TEXT,
  claimed_at TIMESTAMPTZ DEFAULT now(), status TEXT CHECK (status IN ('pending', 'submitted', 'skipped')),
  PRIMARY KEY (epoch_id, escrow_id, inference_id)) PARTITION BY RANGE (epoch_id);
CREATE TABLE IF NOT EXISTS devshard_escrow_cache (escrow_id TEXT PRIMARY KEY, epoch_id BIGINT, escrow_json TEXT, cached_at BIGINT);
CREATE TABLE IF NOT EXISTS devshard_storage_identity (singleton BOOLEAN PRIMARY KEY CHECK (singleton), identity UUID NOT NULL);
