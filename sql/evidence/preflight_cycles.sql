-- The host's vLLM start cycles for the preflight checks, one row per cycle that began in the window, with the
-- build at its start (as-of join of host_builds) and what its start lines state: the arguments the checks read
-- (logprobs_mode, gpu_memory_utilization, max_num_batched_tokens, the speculative method and K, the model and its
-- DSpark block size as acceptance reads it), whether the cycle has a `non-default args` line at all (args_stated: without one, an argument left out is not "the
-- default", it is unknown), its launch (the API server's version line) and first engine start line, its runner
-- (engine_cycles.model_runner), PoC batch and rate, and the first start-up error naming the speculative config
-- (a `config_error` event of the cycle before it was ready: its record and text). The build column is the as-of join; `preflight`
-- attributes cycles to builds by `buildcheck.build_spans`, as `builds check` does.
-- params: $host, $since, $until (the window's time bounds on started_at, NULL = unbounded)
WITH c AS (SELECT * FROM host_build_cycles($host, $since, $until)),
-- the cycle number of each cycle's first event, to find its launch and engine start lines
numbered AS (
  SELECT c.record_key, e.file_id, e.cycle
  FROM c JOIN engine_events e ON e.host = c.host AND e.record_key = c.record_key AND e.cycle_start
),
marks AS (
  SELECT n.record_key, min(e."at") FILTER (e.kind = 'launch') AS launch_at,
         min(e."at") FILTER (e.kind = 'start') AS engine_at
  FROM numbered n JOIN engine_events e ON e.host = $host AND e.file_id = n.file_id AND e.cycle = n.cycle
  GROUP BY ALL
),
-- a start-up error: a config_error before the cycle's server was ready (one later is no start-up error)
errs AS (
  SELECT n.record_key, arg_min(e.record_key, e.line) AS spec_error_record, arg_min(e.detail, e.line) AS spec_error
  FROM numbered n JOIN engine_events e ON e.host = $host AND e.file_id = n.file_id AND e.cycle = n.cycle
    AND e.kind = 'config_error'
  WHERE NOT EXISTS (SELECT 1 FROM engine_events r WHERE r.host = $host AND r.file_id = n.file_id
                      AND r.cycle = n.cycle AND r.kind = 'ready' AND r.line < e.line)
  GROUP BY ALL
),
args AS (
  SELECT DISTINCT c.record_key
  FROM c JOIN log_start_facts f ON f.host = c.host AND f.file_id = c.file_id AND f.part = 'args'
    AND list_contains(c.lines, f.record_key)
)
SELECT c.build, c.started_at, c.ended_at, c.record_key,
       a.record_key IS NOT NULL AS args_stated,
       json_extract_string(c.config, '$.logprobs_mode') AS logprobs_mode,
       json_extract_string(c.config, '$.spec_method') AS spec_method,
       TRY_CAST(json_extract_string(c.config, '$.spec_tokens') AS BIGINT) AS spec_tokens,
       coalesce(c.config->>'model', c.config->>'served_model_name', c.config->>'model_tag') AS model,
       dspark_block_size(coalesce(c.config->>'model', c.config->>'served_model_name', c.config->>'model_tag'))
         AS block_size,
       TRY_CAST(json_extract_string(c.config, '$.gpu_memory_utilization') AS DOUBLE) AS gpu_memory_utilization,
       TRY_CAST(json_extract_string(c.config, '$.max_num_batched_tokens') AS BIGINT) AS max_num_batched_tokens,
       c.model_runner, c.poc_batch_size, c.poc_nonces_per_min,
       m.launch_at, m.engine_at, x.spec_error_record, x.spec_error
FROM c
LEFT JOIN marks m ON m.record_key = c.record_key
LEFT JOIN errs x ON x.record_key = c.record_key
LEFT JOIN args a ON a.record_key = c.record_key
ORDER BY c.started_at, c.record_key
