-- The start lines a cycle's config rests on: record key, the log file's path and identity, line, and what
-- it is (part: server, args, config). params: $host
SELECT f.record_key, any_value(l.path) AS path, f.file_id, f.line, min(f.part) AS part
FROM log_start_facts f
LEFT JOIN log_files l ON l.host = f.host AND l.file_id = f.file_id
WHERE ($host IS NULL OR f.host = $host) AND f.part <> 'startup'
GROUP BY f.record_key, f.file_id, f.line
