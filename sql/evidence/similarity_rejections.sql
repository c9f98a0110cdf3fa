-- Rejection lines of validator logs involving the host, in the window on "at": per result (rejected = an invalid
-- verdict without a score; log_only = a short-output check that would have failed, no verdict) and reason.
-- params: $host, $since, $until
SELECT result, reason, count(*) AS n
FROM validation_scores
WHERE (validator = $host OR executor = $host) AND value IS NULL AND result IN ('rejected', 'log_only')
  AND ($since::TIMESTAMPTZ IS NULL OR "at" >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR "at" < $until)
GROUP BY ALL
ORDER BY result, n DESC, reason
