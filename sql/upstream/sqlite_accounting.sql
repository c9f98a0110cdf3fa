-- Upstream accounting ledger, SQLite layout: accounting.db (docs/sources.md, accounting ledger; gonka-ai/gonka
-- devshard/accounting/store_sqlite.go). Used by the sample generator and tests only.
CREATE TABLE IF NOT EXISTS accounting_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS accounting_escrows (
  escrow_id TEXT PRIMARY KEY, creation_epoch INTEGER, model TEXT, payload BLOB);
CREATE INDEX IF NOT EXISTS accounting_escrows_epoch ON accounting_escrows (creation_epoch, model);
