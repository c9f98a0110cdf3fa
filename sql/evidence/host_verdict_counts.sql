-- Verdicts the host cast on other hosts' answers, one per transaction (an address with several
-- slots gives one verdict, not one per slot), counted per build and kind; disagreed / resolved
-- compare each verdict with the inference's final validated or invalidated status; validation_rule and rule_by
-- name the verdict rule(s) the host ran (verdict_rules: the escrow's devshard version, else build or date), ' + '-joined when the verdicts fall under both.
-- Window: --epoch on the escrow's epoch, --since/--until on event_at.
-- params: $host, $epoch, $since, $until (NULL = unbounded)
SELECT coalesce(validator_build, 'unattributed') AS build, kind,
       count(*) FILTER (valid) AS valid,
       count(*) FILTER (NOT valid) AS invalid,
       count(*) FILTER ((valid AND final_status = 'invalidated') OR (NOT valid AND final_status = 'validated')) AS disagreed,
       count(*) FILTER (final_status IN ('validated', 'invalidated')) AS resolved,
       array_to_string(list_sort(list(DISTINCT verdict_rule_of(escrow_id, validator, event_at))), ' + ') AS validation_rule,
       array_to_string(list_sort(list(DISTINCT verdict_rule_by_of(escrow_id, validator, event_at))), ' + ') AS rule_by
FROM validations
WHERE validator = $host
  AND executor IS DISTINCT FROM $host
  AND ($epoch::BIGINT IS NULL OR epoch_id = $epoch)
  AND ($since::TIMESTAMPTZ IS NULL OR event_at >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR event_at < $until)
GROUP BY ALL
