-- Similarity scores involving the host as validator or as executor, in the window on "at"; a score
-- without a threshold of its own or of its model is judged against $threshold (NULL: not judged);
-- threshold_assumed: judged by a default of chain_params (validation_scores).
-- validation_rule / rule_by: the verdict rule the validator ran (verdict_rules: the escrow's devshard version, else build or date) and how it is known.
-- Rejection and log-only lines (no value) are no scores: similarity_rejections.sql counts them.
-- params: $host, $since, $until, $threshold
SELECT coalesce(executor_build, 'unattributed') AS answers_build,
       coalesce(validator_build, 'unattributed') AS validator_build, value,
       coalesce(passed, value > $threshold::DOUBLE) AS passed, threshold, threshold_source, threshold_assumed,
       verdict_rule_of(escrow_id, validator, "at") AS validation_rule, verdict_rule_by_of(escrow_id, validator, "at") AS rule_by
FROM validation_scores
WHERE (validator = $host OR executor = $host) AND value IS NOT NULL
  AND ($since::TIMESTAMPTZ IS NULL OR "at" >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR "at" < $until)
