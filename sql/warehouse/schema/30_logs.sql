-- Engine and validator logs, /metrics scrapes, PoC validation results.
-- vLLM records are keyed by (host, file_id, line), record_key = file_id:line (file_id = digest of the
-- file's first line): the ingest replaces the rows of the lines it reads again (another --year or
-- --timezone corrects them; a rotated or gzipped twin or a longer copy adds only new lines). The keys
-- are kept by the ingest, not by an index: the vLLM tables are append-only, with no per-row index
-- to maintain. Validator scores are keyed by (validator, record_key) = hash of the line : occurrence.

-- One row per log file identity (hash of its first line): coverage in time, for hours observed.
CREATE TABLE IF NOT EXISTS log_files (
  host VARCHAR NOT NULL, file_id VARCHAR NOT NULL, kind VARCHAR NOT NULL, path VARCHAR, first_at TIMESTAMPTZ,
  last_at TIMESTAMPTZ, lines BIGINT, records BIGINT, unparsed BIGINT, run_id VARCHAR, PRIMARY KEY (host, file_id, kind));

CREATE TABLE IF NOT EXISTS log_spec_decode (
  host VARCHAR NOT NULL, record_key VARCHAR NOT NULL, "at" TIMESTAMPTZ NOT NULL, accepted BIGINT, drafted BIGINT,
  drafts BIGINT, per_position DOUBLE[], mal_printed DOUBLE, mal_semantics VARCHAR, accepted_tps DOUBLE,
  drafted_tps DOUBLE, acceptance_rate_printed DOUBLE, level VARCHAR, proc VARCHAR, file_id VARCHAR, line BIGINT,
  run_id VARCHAR);

-- The V0 engine's `Speculative metrics:` line counts since the engine started (cumulative; K = spec_tokens);
-- columns added to warehouses made before it.
ALTER TABLE log_spec_decode ADD COLUMN IF NOT EXISTS cumulative BOOLEAN;
ALTER TABLE log_spec_decode ADD COLUMN IF NOT EXISTS spec_tokens BIGINT;

CREATE TABLE IF NOT EXISTS log_engine_stats (
  host VARCHAR NOT NULL, record_key VARCHAR NOT NULL, "at" TIMESTAMPTZ NOT NULL, engine VARCHAR, running BIGINT,
  waiting BIGINT, preemptions BIGINT, kv_cache_usage DOUBLE, prefix_cache_hit_rate DOUBLE, prompt_tps DOUBLE,
  generation_tps DOUBLE, level VARCHAR, proc VARCHAR, file_id VARCHAR, line BIGINT, run_id VARCHAR);

CREATE TABLE IF NOT EXISTS log_engine_events (
  host VARCHAR NOT NULL, record_key VARCHAR NOT NULL, kind VARCHAR NOT NULL, "at" TIMESTAMPTZ NOT NULL, detail VARCHAR,
  level VARCHAR, proc VARCHAR, file_id VARCHAR, line BIGINT, run_id VARCHAR);

-- Prometheus samples of the series the evidence needs; '' for an absent label.
CREATE TABLE IF NOT EXISTS metric_samples (
  host VARCHAR NOT NULL, scraped_at TIMESTAMPTZ NOT NULL, family VARCHAR NOT NULL, engine VARCHAR NOT NULL,
  model_name VARCHAR NOT NULL, position VARCHAR NOT NULL, value DOUBLE, run_id VARCHAR,
  PRIMARY KEY (host, scraped_at, family, engine, model_name, position));

CREATE TABLE IF NOT EXISTS log_validation_scores (
  validator VARCHAR NOT NULL, record_key VARCHAR NOT NULL, "at" TIMESTAMPTZ NOT NULL, result VARCHAR, value DOUBLE,
  threshold DOUBLE, escrow_id VARCHAR, inference_id VARCHAR, executor VARCHAR, model VARCHAR, file_id VARCHAR,
  line BIGINT, run_id VARCHAR, PRIMARY KEY (validator, record_key));
-- the reason a rejection line names (validation failed: …, a short-output check's failure), or an invalid result's
ALTER TABLE log_validation_scores ADD COLUMN IF NOT EXISTS reason VARCHAR;

CREATE TABLE IF NOT EXISTS poc_results_t (
  host VARCHAR NOT NULL, result_key VARCHAR NOT NULL, "at" TIMESTAMPTZ, request_id VARCHAR, validator VARCHAR,
  participant VARCHAR, model VARCHAR, event VARCHAR, n_total BIGINT, n_mismatch BIGINT, reported_p_value DOUBLE,
  reported_fraud BOOLEAN, dist_threshold DOUBLE, p_mismatch DOUBLE, cutoff DOUBLE, params_source VARCHAR,
  p_value DOUBLE, fraud BOOLEAN, file VARCHAR, run_id VARCHAR, PRIMARY KEY (host, result_key));
