-- Engine and validator logs, /metrics scrapes, PoC validation results (issue 5; sources.md §7–8).
-- Records are keyed by (host, record_key): record_key = hash of the record's first line and its
-- occurrence number in the file, so re-reading a file, its rotated or gzipped twin or a longer
-- version of it adds nothing twice.

-- One row per log file identity (hash of its first line): coverage in time, for hours observed.
CREATE TABLE IF NOT EXISTS log_files (
  host VARCHAR NOT NULL, file_id VARCHAR NOT NULL, kind VARCHAR NOT NULL, path VARCHAR, first_at TIMESTAMPTZ,
  last_at TIMESTAMPTZ, lines BIGINT, records BIGINT, unparsed BIGINT, run_id VARCHAR, PRIMARY KEY (host, file_id, kind));

CREATE TABLE IF NOT EXISTS log_spec_decode (
  host VARCHAR NOT NULL, record_key VARCHAR NOT NULL, "at" TIMESTAMPTZ NOT NULL, accepted BIGINT, drafted BIGINT,
  drafts BIGINT, per_position DOUBLE[], mal_printed DOUBLE, mal_semantics VARCHAR, accepted_tps DOUBLE,
  drafted_tps DOUBLE, acceptance_rate_printed DOUBLE, level VARCHAR, proc VARCHAR, file_id VARCHAR, line BIGINT,
  run_id VARCHAR, PRIMARY KEY (host, record_key));

CREATE TABLE IF NOT EXISTS log_engine_stats (
  host VARCHAR NOT NULL, record_key VARCHAR NOT NULL, "at" TIMESTAMPTZ NOT NULL, engine VARCHAR, running BIGINT,
  waiting BIGINT, preemptions BIGINT, kv_cache_usage DOUBLE, prefix_cache_hit_rate DOUBLE, prompt_tps DOUBLE,
  generation_tps DOUBLE, level VARCHAR, proc VARCHAR, file_id VARCHAR, line BIGINT, run_id VARCHAR,
  PRIMARY KEY (host, record_key));

CREATE TABLE IF NOT EXISTS log_engine_events (
  host VARCHAR NOT NULL, record_key VARCHAR NOT NULL, kind VARCHAR NOT NULL, "at" TIMESTAMPTZ NOT NULL, detail VARCHAR,
  level VARCHAR, proc VARCHAR, file_id VARCHAR, line BIGINT, run_id VARCHAR, PRIMARY KEY (host, record_key, kind));

-- Prometheus samples of the series the evidence needs; '' for an absent label.
CREATE TABLE IF NOT EXISTS metric_samples (
  host VARCHAR NOT NULL, scraped_at TIMESTAMPTZ NOT NULL, family VARCHAR NOT NULL, engine VARCHAR NOT NULL,
  model_name VARCHAR NOT NULL, position VARCHAR NOT NULL, value DOUBLE, run_id VARCHAR,
  PRIMARY KEY (host, scraped_at, family, engine, model_name, position));

CREATE TABLE IF NOT EXISTS log_validation_scores (
  validator VARCHAR NOT NULL, record_key VARCHAR NOT NULL, "at" TIMESTAMPTZ NOT NULL, result VARCHAR, value DOUBLE,
  threshold DOUBLE, escrow_id VARCHAR, inference_id VARCHAR, executor VARCHAR, model VARCHAR, file_id VARCHAR,
  line BIGINT, run_id VARCHAR, PRIMARY KEY (validator, record_key));

CREATE TABLE IF NOT EXISTS poc_results_t (
  host VARCHAR NOT NULL, result_key VARCHAR NOT NULL, "at" TIMESTAMPTZ, request_id VARCHAR, validator VARCHAR,
  participant VARCHAR, model VARCHAR, event VARCHAR, n_total BIGINT, n_mismatch BIGINT, reported_p_value DOUBLE,
  reported_fraud BOOLEAN, dist_threshold DOUBLE, p_mismatch DOUBLE, cutoff DOUBLE, params_source VARCHAR,
  p_value DOUBLE, fraud BOOLEAN, file VARCHAR, run_id VARCHAR, PRIMARY KEY (host, result_key));
