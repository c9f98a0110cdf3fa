-- PoC validation results involving the host (ingested by it, validating it, or validated by it).
-- params: $host, $since, $until
SELECT event, participant, validator, n_total, n_mismatch, p_value, p_mismatch, cutoff, fraud, reported_disagrees,
       params_source, "at"
FROM poc_results
WHERE (host = $host OR participant = $host OR validator = $host)
  AND ($since::TIMESTAMPTZ IS NULL OR "at" >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR "at" < $until)
