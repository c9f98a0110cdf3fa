-- The host's judged answers: inferences it executed with a finish transaction, not timed out,
-- that received at least one sampled validation (MsgValidation); sampling from the stored request (the client's:
-- devshardd stores the request as the client sent it), with what the client set of the parameters devshardd injects.
-- escrow_rules: the verdict rule set of the escrow's devshard version where known (devshard_version_rules).
-- chain_mode: the chain's logprobs mode for the model when the answer started (chain_params; value, source, assumed).
-- Window: --epoch on the escrow's epoch, --since/--until on started_at. params: $host, $epoch, $since, $until
SELECT i.epoch_id, i.escrow_id, i.inference_id, coalesce(i.executor_build, 'unattributed') AS build,
       i.status, i.challenged, a.temperature, a.top_p, a.escrow_id IS NOT NULL AS stored,
       a.logprobs_requested, a.top_logprobs, a.seed_given, a.min_tokens, a.logprobs_mode,
       escrow_rule(i.escrow_id) AS escrow_rules,
       chain_value_of('logprobs_mode', i.model, i.started_at) AS chain_mode
FROM inferences i
LEFT JOIN answer_checks_t a ON a.escrow_id = i.escrow_id AND a.inference_id = i.inference_id
WHERE i.executor = $host AND i.finished AND i.status <> 'timed_out'
  AND EXISTS (SELECT 1 FROM validations v WHERE v.escrow_id = i.escrow_id AND v.inference_id = i.inference_id
              AND v.kind = 'validation')
  AND ($epoch::BIGINT IS NULL OR i.epoch_id = $epoch)
  AND ($since::TIMESTAMPTZ IS NULL OR i.started_at >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR i.started_at < $until)
