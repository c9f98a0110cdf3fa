-- Time covered by the host's vLLM log files, and the host's build windows. params: $host
SELECT first_at, last_at FROM log_files WHERE host = $host AND kind = 'vllm' AND first_at IS NOT NULL
