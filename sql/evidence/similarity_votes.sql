-- Field verdicts (validations view) involving the host as validator or executor, with both builds and the verdict
-- rule the validator ran (verdict_rules; rule_by = version, else build or date: assumed).
-- params: $host, $epoch, $since, $until
SELECT coalesce(executor_build, 'unattributed') AS answers_build,
       coalesce(validator_build, 'unattributed') AS validator_build, valid,
       verdict_rule_of(escrow_id, validator, event_at) AS validation_rule, verdict_rule_by_of(escrow_id, validator, event_at) AS rule_by
FROM validations
WHERE (validator = $host OR executor = $host) AND validator IS DISTINCT FROM executor
  AND ($epoch::BIGINT IS NULL OR epoch_id = $epoch)
  AND ($since::TIMESTAMPTZ IS NULL OR event_at >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR event_at < $until)
