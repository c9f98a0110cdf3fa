-- Integrity of the host's stored answers in the window (one row).
-- Window: --epoch on the escrow's epoch, --since/--until on started_at.
-- params: $host, $epoch, $since, $until, $tolerance_s (seconds added to both ends of an answer's time),
--         $cap_s (longest engine-death or PoC window when its closing event is missing or late)
--
-- Empty answers against the host's engine events (view engine_events):
--   answer time   = [started_at - tolerance, greatest(started_at, confirmed_at, first finish tx event_at) + tolerance]
--   engine death  = from each fatal / engine_dead / oom / worker_died event of the host to the host's next
--                   ready event at or after it, at most cap after the death (no ready → death + cap)
--   PoC window    = from each poc_start of the host to its next poc_stop at or after it, at most cap
--   in_engine_death / in_poc = the answer time overlaps at least one such window (closed intervals); an answer
--   overlapping both counts in both columns; unexplained = empty answers overlapping neither.
--   No engine events of the host at all → the three columns are NULL (not matched), not 0.
WITH a AS (
  SELECT c.escrow_id, c.inference_id, c.complete, c.completion_tokens, c.logprob_tokens,
         c.duplicate_top_logprob_positions, c.nan_logprobs, c.missing_logprobs, c.tokens_not_ids, c.empty,
         c.started_at
  FROM answer_checks c
  WHERE c.executor = $host
    AND ($epoch::BIGINT IS NULL OR c.epoch_id = $epoch)
    AND ($since::TIMESTAMPTZ IS NULL OR c.started_at >= $since)
    AND ($until::TIMESTAMPTZ IS NULL OR c.started_at < $until)
),
ev AS (
  SELECT "at", kind FROM engine_events WHERE host = $host
),
deaths AS (
  SELECT d."at" AS w_from,
         least(coalesce((SELECT min(r."at") FROM ev r WHERE r.kind = 'ready' AND r."at" >= d."at"),
                        d."at" + to_seconds($cap_s::BIGINT)),
               d."at" + to_seconds($cap_s::BIGINT)) AS w_to
  FROM ev d
  WHERE d.kind IN ('fatal', 'engine_dead', 'oom', 'worker_died')
),
pocs AS (
  SELECT p."at" AS w_from,
         least(coalesce((SELECT min(s."at") FROM ev s WHERE s.kind = 'poc_stop' AND s."at" >= p."at"),
                        p."at" + to_seconds($cap_s::BIGINT)),
               p."at" + to_seconds($cap_s::BIGINT)) AS w_to
  FROM ev p
  WHERE p.kind = 'poc_start'
),
finish AS (
  SELECT t.escrow_id, t.inference_id, min(t.event_at) AS finish_at
  FROM txs t
  WHERE t.kind = 'finish' AND t.escrow_id IN (SELECT escrow_id FROM a WHERE empty)
  GROUP BY ALL
),
empties AS (
  SELECT a.started_at - to_seconds($tolerance_s::BIGINT) AS t_from,
         greatest(a.started_at, i.confirmed_at, f.finish_at) + to_seconds($tolerance_s::BIGINT) AS t_to
  FROM a
  LEFT JOIN inferences i ON i.escrow_id = a.escrow_id AND i.inference_id = a.inference_id
  LEFT JOIN finish f ON f.escrow_id = a.escrow_id AND f.inference_id = a.inference_id
  WHERE a.empty
),
matched AS (
  SELECT coalesce(EXISTS (SELECT 1 FROM deaths d WHERE d.w_from <= e.t_to AND d.w_to >= e.t_from), false) AS in_death,
         coalesce(EXISTS (SELECT 1 FROM pocs p WHERE p.w_from <= e.t_to AND p.w_to >= e.t_from), false) AS in_poc
  FROM empties e
),
m AS (
  SELECT count(*) FILTER (WHERE in_death)::BIGINT AS in_death,
         count(*) FILTER (WHERE in_poc)::BIGINT AS in_poc,
         count(*) FILTER (WHERE NOT in_death AND NOT in_poc)::BIGINT AS unexplained,
         (SELECT count(*) FROM ev) > 0 AS has_events
  FROM matched
)
SELECT count(*)::BIGINT AS answers_scanned,
       count(*) FILTER (WHERE complete)::BIGINT AS complete,
       count(*) FILTER (WHERE complete AND completion_tokens IS DISTINCT FROM logprob_tokens)::BIGINT AS token_count_mismatches,
       coalesce(sum(duplicate_top_logprob_positions), 0)::BIGINT AS duplicate_top_logprob_positions,
       count(*) FILTER (WHERE nan_logprobs > 0 OR missing_logprobs > 0)::BIGINT AS nan_or_missing_logprob_answers,
       count(*) FILTER (WHERE tokens_not_ids > 0)::BIGINT AS tokens_not_ids_answers,
       count(*) FILTER (WHERE empty)::BIGINT AS empty_answers,
       any_value(CASE WHEN m.has_events THEN m.in_death END)::BIGINT AS empty_answers_in_engine_death,
       any_value(CASE WHEN m.has_events THEN m.in_poc END)::BIGINT AS empty_answers_in_poc,
       any_value(CASE WHEN m.has_events THEN m.unexplained END)::BIGINT AS empty_answers_unexplained
FROM a CROSS JOIN m
