-- An old epoch file from the squashed migration list (docs/sources.md, tables and columns read): a 3-column
-- sealed_inferences and no sessions.version / imported_nonce. Sample generator only.
CREATE TABLE IF NOT EXISTS schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE IF NOT EXISTS sessions (
  escrow_id TEXT PRIMARY KEY, creator_addr TEXT NOT NULL, config_json TEXT NOT NULL,
  group_json TEXT NOT NULL, initial_balance INTEGER NOT NULL, latest_nonce INTEGER DEFAULT 0,
  last_finalized INTEGER DEFAULT 0, status TEXT DEFAULT 'active', settled_at INTEGER);
CREATE TABLE IF NOT EXISTS diffs (
  escrow_id TEXT, nonce INTEGER, txs_proto BLOB NOT NULL, user_sig BLOB, post_state_root BLOB,
  state_hash BLOB, warm_keys_json TEXT, created_at INTEGER DEFAULT 0, PRIMARY KEY (escrow_id, nonce));
CREATE TABLE IF NOT EXISTS signatures (
  escrow_id TEXT, nonce INTEGER, slot_id INTEGER, sig BLOB NOT NULL, PRIMARY KEY (escrow_id, nonce, slot_id));
CREATE TABLE IF NOT EXISTS snapshots (
  escrow_id TEXT PRIMARY KEY, nonce INTEGER, state_data BLOB NOT NULL, created_at INTEGER);
CREATE TABLE IF NOT EXISTS sealed_inferences (
  escrow_id TEXT, inference_id INTEGER, sealed_nonce INTEGER NOT NULL, PRIMARY KEY (escrow_id, inference_id));
