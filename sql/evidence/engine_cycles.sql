-- Start cycles of the vLLM logs in host and time order (all hosts when $host is NULL): builds infer / check.
-- params: $host
SELECT host, started_at, ended_at, vllm_version, fingerprint, config::VARCHAR AS config, lines
FROM engine_cycles
WHERE $host IS NULL OR host = $host
ORDER BY host, started_at, file_id, line
