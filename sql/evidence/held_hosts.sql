-- Every address the warehouse holds as a host, nearest to $host first (edit distance): slot holders,
-- the build timeline, log sources, PoC results, validation scores and the gateway tracker's participants.
-- The log, PoC and tracker parts read their stored tables: the views over them compute far more than a
-- list of addresses needs.
-- params: $host
WITH held AS (
    SELECT address AS host FROM escrow_slots
    UNION SELECT host FROM host_builds
    UNION SELECT host FROM log_files
    UNION SELECT host FROM poc_results_t
    UNION SELECT participant FROM poc_results_t
    UNION SELECT validator FROM poc_results_t
    UNION SELECT validator FROM log_validation_scores
    UNION SELECT executor FROM log_validation_scores
    UNION SELECT address FROM ledger_slots
    UNION SELECT participant FROM api_participants
)
SELECT host, levenshtein(host, $host) AS distance
FROM held
WHERE host IS NOT NULL
ORDER BY distance, host
