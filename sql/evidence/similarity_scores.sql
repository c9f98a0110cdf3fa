-- Similarity scores involving the host as validator or as executor, in the window on "at".
-- params: $host, $since, $until
SELECT coalesce(executor_build, 'unattributed') AS answers_build,
       coalesce(validator_build, 'unattributed') AS validator_build, value, passed
FROM validation_scores
WHERE (validator = $host OR executor = $host)
  AND ($since::TIMESTAMPTZ IS NULL OR "at" >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR "at" < $until)
