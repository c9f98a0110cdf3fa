-- Integrity of the host's stored answers in the window (one row).
-- Window: --epoch on the escrow's epoch, --since/--until on started_at. params: $host, $epoch, $since, $until
SELECT count(*)::BIGINT AS answers_scanned,
       count(*) FILTER (WHERE complete)::BIGINT AS complete,
       count(*) FILTER (WHERE complete AND completion_tokens IS DISTINCT FROM logprob_tokens)::BIGINT AS token_count_mismatches,
       coalesce(sum(duplicate_top_logprob_positions), 0)::BIGINT AS duplicate_top_logprob_positions,
       count(*) FILTER (WHERE nan_logprobs > 0 OR missing_logprobs > 0)::BIGINT AS nan_or_missing_logprob_answers,
       count(*) FILTER (WHERE tokens_not_ids > 0)::BIGINT AS tokens_not_ids_answers,
       count(*) FILTER (WHERE empty)::BIGINT AS empty_answers
FROM answer_checks
WHERE executor = $host
  AND ($epoch::BIGINT IS NULL OR epoch_id = $epoch)
  AND ($since::TIMESTAMPTZ IS NULL OR started_at >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR started_at < $until)
