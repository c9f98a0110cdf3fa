-- Start-up facts of the host's vLLM start cycles per build (the build at the cycle's start, as-of join of
-- host_builds): time to ready, model loading, KV cache, concurrency and PoC throughput as the logs print them.
-- Medians are quantile_cont (linear interpolation between cycles). params: $host, $since, $until (the
-- window's time bounds on started_at, NULL = unbounded)
WITH c AS (SELECT * FROM host_build_cycles($host, $since, $until))
SELECT build,
       count(*) AS cycles,
       count(ready_at) AS ready_cycles,
       string_agg(DISTINCT vllm_version, ', ' ORDER BY vllm_version) AS vllm_versions,
       string_agg(DISTINCT fingerprint, ', ' ORDER BY fingerprint) AS fingerprints,
       quantile_cont(time_to_ready_s, 0.5) AS time_to_ready_median_s,
       max(time_to_ready_s) AS time_to_ready_max_s,
       quantile_cont(model_load_s, 0.5) AS model_load_median_s,
       quantile_cont(model_load_gib, 0.5) AS model_load_gib,
       quantile_cont(kv_cache_gib, 0.5) AS kv_cache_gib,
       quantile_cont(kv_cache_tokens, 0.5) AS kv_cache_tokens,
       quantile_cont(max_concurrency, 0.5) AS max_concurrency,
       quantile_cont(poc_nonces_per_min, 0.5) AS poc_nonces_per_min
FROM c
GROUP BY build
