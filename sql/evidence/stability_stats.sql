-- Engine stats log lines of the host (the stats lines' Preemptions: N; KV cache usage). params: $host
SELECT "at", coalesce(build, 'unattributed') AS build, preemptions, kv_cache_usage
FROM engine_stats WHERE host = $host AND source = 'log'
