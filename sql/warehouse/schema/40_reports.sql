-- Epoch reports written by `gonka-evidence run` (pipeline/runner.py): one row per host and epoch.
-- fingerprint = sha256 of the report's Markdown without its provenance lines; a run rewrites the
-- report of the newest closed epoch when it changes.
CREATE TABLE IF NOT EXISTS epoch_reports_t (
  host VARCHAR NOT NULL, epoch_id BIGINT NOT NULL, closed_at TIMESTAMPTZ, closed_by VARCHAR,
  report_dir VARCHAR NOT NULL, fingerprint VARCHAR NOT NULL, written_at TIMESTAMPTZ NOT NULL,
  rewrites BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (host, epoch_id));
-- A digest of what the report was last built from (pipeline/runner.py `report_inputs`): a run does not
-- build the newest closed epoch's report again to compare it while its inputs are the same.
ALTER TABLE epoch_reports_t ADD COLUMN IF NOT EXISTS inputs VARCHAR;
-- The report's headline numbers as JSON (pipeline/output/report/index.py `headline`): OUTPUT/index.html is
-- drawn from these, so it is rebuilt without recomputing any epoch.
ALTER TABLE epoch_reports_t ADD COLUMN IF NOT EXISTS headline VARCHAR;
