-- What the start lines of vLLM logs state (pipeline/sources/logs/vllm_config.py): one row per (line, key).
-- part = config (what a build is: version, model, speculative config, parallel sizes, quantization,
-- KV-cache dtype, the non-default arguments) or startup (what one start measured: model loading, KV cache,
-- concurrency, PoC throughput). Keyed like the other vLLM tables: record_key = file_id:line.
CREATE TABLE IF NOT EXISTS log_start_facts (
  host VARCHAR NOT NULL, record_key VARCHAR NOT NULL, "at" TIMESTAMPTZ, part VARCHAR NOT NULL, key VARCHAR NOT NULL,
  value VARCHAR, level VARCHAR, proc VARCHAR, file_id VARCHAR, line BIGINT, run_id VARCHAR);
