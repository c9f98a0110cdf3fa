-- Upstream SQLite layout: <storeDir>/_meta.db (docs/sources.md, SQLite layout). Used by the sample generator only.
CREATE TABLE IF NOT EXISTS schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE IF NOT EXISTS escrow_epoch (escrow_id TEXT PRIMARY KEY, epoch_id INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS escrow_epoch_by_epoch ON escrow_epoch (epoch_id);
CREATE TABLE IF NOT EXISTS escrow_cache (escrow_id TEXT PRIMARY KEY, epoch_id INTEGER, escrow_json TEXT, cached_at INTEGER);
CREATE INDEX IF NOT EXISTS escrow_cache_by_epoch ON escrow_cache (epoch_id);
