-- The host's vLLM start cycles for the preflight checks, one row per cycle that began in the window, with the
-- build at its start (as-of join of host_builds) and what its start lines state: the arguments the checks read
-- (logprobs_mode, gpu_memory_utilization, max_num_batched_tokens, the speculative method and K, the model and its
-- DSpark block size as acceptance reads it), whether the
-- cycle has a `non-default args` line at all (args_stated: without one, an argument left out is not "the
-- default", it is unknown), and its launch (the API server's version line) and first engine start line.
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
       m.launch_at, m.engine_at
FROM c
LEFT JOIN marks m ON m.record_key = c.record_key
LEFT JOIN args a ON a.record_key = c.record_key
ORDER BY c.started_at, c.record_key
