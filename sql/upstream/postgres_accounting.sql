-- Upstream accounting ledger, PostgreSQL row layout (docs/sources.md, accounting ledger; gonka-ai/gonka
-- devshard/accounting/store_postgres.go). Used by the sample generator and tests only.
CREATE TABLE IF NOT EXISTS accounting_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS accounting_migration (name TEXT PRIMARY KEY, completed_at TEXT);
CREATE TABLE IF NOT EXISTS accounting_writers (writer_id TEXT PRIMARY KEY, updated_at TEXT, writer_errors BIGINT);
CREATE TABLE IF NOT EXISTS accounting_escrow_state (
  escrow_id TEXT PRIMARY KEY, creation_epoch BIGINT, model TEXT, meta_json BYTEA, phase TEXT, phase_rank INT,
  latest_nonce BIGINT);
CREATE INDEX IF NOT EXISTS accounting_escrow_state_epoch ON accounting_escrow_state (creation_epoch, model);
CREATE TABLE IF NOT EXISTS accounting_escrow_counters (
  escrow_id TEXT, writer_id TEXT, counter_id TEXT, counter_key BYTEA, count BIGINT,
  PRIMARY KEY (escrow_id, writer_id, counter_id));
CREATE TABLE IF NOT EXISTS accounting_escrow_slot_counts (
  escrow_id TEXT, writer_id TEXT, slot_id BIGINT, open_challenges BIGINT, invalid_nonces BIGINT,
  PRIMARY KEY (escrow_id, writer_id, slot_id));
CREATE TABLE IF NOT EXISTS accounting_escrow_host_stats (
  escrow_id TEXT, slot_id BIGINT, missed BIGINT, invalid BIGINT, cost BIGINT, required_validations BIGINT,
  completed_validations BIGINT, PRIMARY KEY (escrow_id, slot_id));
CREATE TABLE IF NOT EXISTS accounting_escrow_invalid_nonces (
  escrow_id TEXT, nonce BIGINT, slot_id BIGINT DEFAULT -1, PRIMARY KEY (escrow_id, nonce));
CREATE TABLE IF NOT EXISTS accounting_escrow_protocol_nonces (
  escrow_id TEXT, nonce BIGINT, slot_id BIGINT, PRIMARY KEY (escrow_id, nonce));
CREATE TABLE IF NOT EXISTS accounting_escrow_challenges (
  escrow_id TEXT, nonce BIGINT, slot_id BIGINT, resolved BOOLEAN, PRIMARY KEY (escrow_id, nonce));
CREATE TABLE IF NOT EXISTS accounting_escrows (
  escrow_id TEXT PRIMARY KEY, creation_epoch BIGINT, model TEXT, payload BYTEA);
