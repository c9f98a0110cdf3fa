-- Public views of the accounting ledger, saved API / chain JSON and stored answers (docs/data-model.md).

-- Counter rows of both origins, attributed to (epoch, participant, model): a ledger database's
-- counters through the escrow's slot list, saved API counters as given.
CREATE OR REPLACE VIEW tracker_counter_rows AS
SELECT 'ledger' AS origin, e.epoch_id, s.address AS participant, e.model, c.escrow_id, c.slot_id, c.disposition,
       c.phase, c.warmup, c.timeout_kind, c.timeout_outcome, c.failure_origin, c.no_send_reason, c.quarantine_mode,
       c.detail_reason, c.delivery_reason, c.timeout_reason, c.terminal, c.ghost_reason, c.slow_receipt,
       c.slow_chunk, c.clock_drifted, c.slow_decode, c.logprobs_decoded, c.count, c.key_json, c.schema_version
FROM ledger_counters c
JOIN ledger_escrows e USING (escrow_id)
JOIN ledger_slots s ON s.escrow_id = c.escrow_id AND s.slot_id = c.slot_id
UNION ALL
SELECT 'api', epoch_id, participant, model, escrow_id, slot_id, disposition, phase, warmup, timeout_kind,
       timeout_outcome, failure_origin, no_send_reason, quarantine_mode, detail_reason, delivery_reason,
       timeout_reason, terminal, ghost_reason, slow_receipt, slow_chunk, clock_drifted, slow_decode,
       logprobs_decoded, count, key_json, schema_version
FROM api_counters;

CREATE OR REPLACE VIEW tracker_participants AS
WITH slots AS (
  SELECT e.epoch_id, s.address AS participant, e.model, e.escrow_id, s.slot_id, e.schema_version,
         CASE WHEN e.latest_nonce < s.slot_id OR e.group_size IS NULL OR e.group_size = 0 THEN 0
              ELSE (e.latest_nonce - s.slot_id) // e.group_size + CASE WHEN s.slot_id > 0 THEN 1 ELSE 0 END
         END AS assigned
  FROM ledger_escrows e JOIN ledger_slots s USING (escrow_id)
),
ledger_totals AS (
  SELECT sl.epoch_id, sl.participant, sl.model, max(sl.schema_version) AS schema_version,
         count(DISTINCT sl.escrow_id) AS escrows, (sum(sl.assigned))::BIGINT AS assigned_nonces,
         (sum(coalesce(ss.protocol_nonces, 0)))::BIGINT AS protocol_only, (sum(coalesce(h.missed, 0)))::BIGINT AS protocol_misses,
         (sum(coalesce(h.invalid, 0)))::BIGINT AS protocol_invalid, (sum(coalesce(ss.open_challenges, 0)))::BIGINT AS unresolved_challenges,
         (sum(coalesce(ss.invalid_transitions, 0)))::BIGINT AS recorded_invalid_transitions
  FROM slots sl
  LEFT JOIN ledger_slot_sets ss ON ss.escrow_id = sl.escrow_id AND ss.slot_id = sl.slot_id
  LEFT JOIN ledger_host_stats h ON h.escrow_id = sl.escrow_id AND h.slot_id = sl.slot_id
  GROUP BY ALL
),
api_totals AS (
  SELECT a.epoch_id, a.participant, a.model, a.schema_version,
         (SELECT count(DISTINCT c.escrow_id) FROM api_counters c WHERE c.epoch_id = a.epoch_id
            AND c.participant = a.participant AND c.model = a.model) AS escrows,
         a.assigned_nonces, a.protocol_only, a.protocol_misses, a.protocol_invalid, a.unresolved_challenges,
         a.recorded_invalid_transitions
  FROM api_participants a
  WHERE NOT EXISTS (SELECT 1 FROM ledger_totals l WHERE l.epoch_id = a.epoch_id AND l.participant = a.participant
                    AND l.model = a.model)
),
totals AS (
  SELECT 'ledger' AS origin, * FROM ledger_totals
  UNION ALL
  SELECT 'api', * FROM api_totals
),
counts AS (
  SELECT origin, epoch_id, participant, model,
    (sum(count) FILTER (WHERE disposition = 'finished_used'))::BIGINT AS finished_used,
    (sum(count) FILTER (WHERE disposition = 'finished_unused'))::BIGINT AS finished_unused,
    (sum(count) FILTER (WHERE disposition = 'finished_usage_unknown'))::BIGINT AS finished_usage_unknown,
    (sum(count) FILTER (WHERE disposition = 'unfinished_refused'))::BIGINT AS unfinished_refused,
    (sum(count) FILTER (WHERE disposition = 'unfinished_execution'))::BIGINT AS unfinished_execution,
    (sum(count) FILTER (WHERE disposition = 'ghost'))::BIGINT AS ghost,
    (sum(count) FILTER (WHERE disposition LIKE 'finished%' AND NOT warmup))::BIGINT AS delivered,
    (sum(count) FILTER (WHERE warmup))::BIGINT AS warmup_probes,
    (sum(count) FILTER (WHERE disposition LIKE 'finished%' AND NOT warmup AND phase IS DISTINCT FROM 'poc'))::BIGINT AS delivered_outside_poc,
    (sum(count) FILTER (WHERE disposition LIKE 'unfinished%' AND NOT warmup AND phase IS DISTINCT FROM 'poc'))::BIGINT AS unfinished_outside_poc,
    (sum(count) FILTER (WHERE slow_decode AND NOT warmup AND phase IS DISTINCT FROM 'poc'))::BIGINT AS slow_decode,
    (sum(count) FILTER (WHERE slow_chunk AND NOT warmup AND phase IS DISTINCT FROM 'poc'))::BIGINT AS slow_chunk,
    (sum(count) FILTER (WHERE slow_receipt AND NOT warmup AND phase IS DISTINCT FROM 'poc'))::BIGINT AS slow_receipt,
    (sum(count) FILTER (WHERE clock_drifted AND NOT warmup))::BIGINT AS clock_drifted,
    (sum(count) FILTER (WHERE logprobs_decoded AND NOT warmup))::BIGINT AS logprobs_decoded,
    (sum(count) FILTER (WHERE slow_decode AND NOT warmup AND phase = 'poc'))::BIGINT AS slow_decode_in_poc,
    (sum(count) FILTER (WHERE disposition = 'finished_unused' AND NOT warmup))::BIGINT AS unused_counted,
    (sum(count) FILTER (WHERE disposition = 'unfinished_refused' AND NOT warmup
                       AND coalesce(failure_origin, '') NOT IN ('gateway_policy', 'client')))::BIGINT AS host_blamed_refusals,
    (sum(count) FILTER (WHERE disposition = 'unfinished_execution' AND NOT warmup
                       AND coalesce(failure_origin, '') NOT IN ('gateway_policy', 'client')))::BIGINT AS host_blamed_execution,
    (sum(count) FILTER (WHERE timeout_outcome IN ('vote_collection_failed', 'insufficient_votes')))::BIGINT AS timeouts_undecided,
    (sum(count) FILTER (WHERE timeout_outcome IS NOT NULL AND timeout_outcome <> 'skipped'))::BIGINT AS timeouts_decided,
    (sum(count) FILTER (WHERE disposition = 'ghost' AND no_send_reason = 'participant_throttled_no_send'))::BIGINT AS throttled_ghosts,
    (sum(count) FILTER (WHERE disposition = 'ghost' AND quarantine_mode IN ('probe', 'shadow', 'probation')))::BIGINT AS quarantined_ghosts,
    (sum(count) FILTER (WHERE 'unknown' IN (no_send_reason, detail_reason, delivery_reason, timeout_reason)))::BIGINT AS unknown_reasons
  FROM tracker_counter_rows
  GROUP BY ALL
),
dispositions AS (
  SELECT origin, epoch_id, participant, model, map_from_entries(list({'k': disposition, 'v': n} ORDER BY disposition)) AS dispositions
  FROM (SELECT origin, epoch_id, participant, model, coalesce(disposition, 'unknown') AS disposition, (sum(count))::BIGINT AS n
        FROM tracker_counter_rows GROUP BY ALL)
  GROUP BY ALL
),
chain AS (
  SELECT epoch_id, participant,
         max(missed) FILTER (WHERE kind = 'devshard_host_epoch_stats') AS chain_missed,
         max(invalid) FILTER (WHERE kind = 'devshard_host_epoch_stats') AS chain_invalid,
         max(missed_requests) FILTER (WHERE kind <> 'devshard_host_epoch_stats') AS chain_missed_requests,
         max(invalidated_inferences) FILTER (WHERE kind <> 'devshard_host_epoch_stats') AS chain_invalidated_inferences
  FROM chain_participant_stats GROUP BY ALL
)
SELECT t.epoch_id, t.participant, t.model, t.origin, t.schema_version, t.escrows, t.assigned_nonces,
       d.dispositions,
       coalesce(t.protocol_only, 0) AS protocol_only,
       coalesce(c.finished_used, 0) AS finished_used, coalesce(c.finished_unused, 0) AS finished_unused,
       coalesce(c.finished_usage_unknown, 0) AS finished_usage_unknown,
       coalesce(c.unfinished_refused, 0) AS unfinished_refused, coalesce(c.unfinished_execution, 0) AS unfinished_execution,
       coalesce(c.ghost, 0) AS ghost,
       coalesce(c.delivered, 0) AS delivered, coalesce(c.warmup_probes, 0) AS warmup_probes,
       coalesce(c.delivered_outside_poc, 0) AS delivered_outside_poc,
       coalesce(c.slow_decode, 0) AS slow_decode, coalesce(c.slow_chunk, 0) AS slow_chunk,
       coalesce(c.slow_receipt, 0) AS slow_receipt, coalesce(c.clock_drifted, 0) AS clock_drifted,
       coalesce(c.logprobs_decoded, 0) AS logprobs_decoded, coalesce(c.slow_decode_in_poc, 0) AS slow_decode_in_poc,
       coalesce(t.protocol_misses, 0) AS protocol_misses, coalesce(t.protocol_invalid, 0) AS protocol_invalid,
       coalesce(t.unresolved_challenges, 0) AS unresolved_challenges,
       coalesce(t.recorded_invalid_transitions, 0) AS recorded_invalid_transitions,
       coalesce(c.unused_counted, 0) AS unused_counted,
       coalesce(c.host_blamed_refusals, 0) AS host_blamed_refusals,
       coalesce(c.host_blamed_execution, 0) AS host_blamed_execution,
       coalesce(c.unfinished_outside_poc, 0) AS unfinished_outside_poc,
       coalesce(c.timeouts_undecided, 0) AS timeouts_undecided, coalesce(c.timeouts_decided, 0) AS timeouts_decided,
       coalesce(c.throttled_ghosts, 0) AS throttled_ghosts, coalesce(c.quarantined_ghosts, 0) AS quarantined_ghosts,
       coalesce(c.unknown_reasons, 0) AS unknown_reasons,
       ch.chain_missed, ch.chain_invalid, ch.chain_missed_requests, ch.chain_invalidated_inferences
FROM totals t
LEFT JOIN counts c USING (origin, epoch_id, participant, model)
LEFT JOIN dispositions d USING (origin, epoch_id, participant, model)
LEFT JOIN chain ch USING (epoch_id, participant);

-- Findings, recomputed (never stored upstream): thresholds of the newer build, no finding below 20.
CREATE OR REPLACE VIEW tracker_findings AS
WITH rates AS (
  SELECT p.epoch_id, p.participant, p.model, f.code, f.part, f.whole, f.warn, f.crit
  FROM tracker_participants p
  CROSS JOIN UNNEST([
    {'code': 'execution_timeouts', 'part': p.host_blamed_execution, 'whole': p.delivered + p.unfinished_refused + p.unfinished_execution, 'warn': DOUBLE '0.01', 'crit': DOUBLE '0.05'},
    {'code': 'refusals', 'part': p.host_blamed_refusals, 'whole': p.delivered + p.unfinished_refused + p.unfinished_execution, 'warn': DOUBLE '0.05', 'crit': DOUBLE '0.20'},
    {'code': 'answers_unused', 'part': p.unused_counted, 'whole': p.delivered, 'warn': DOUBLE '0.20', 'crit': NULL::DOUBLE},
    {'code': 'chain_recorded_misses', 'part': p.protocol_misses, 'whole': p.assigned_nonces, 'warn': DOUBLE '0.01', 'crit': DOUBLE '0.05'},
    {'code': 'chain_recorded_invalid', 'part': p.protocol_invalid, 'whole': p.assigned_nonces, 'warn': DOUBLE '0.01', 'crit': DOUBLE '0.05'},
    {'code': 'challenges_unresolved', 'part': p.unresolved_challenges, 'whole': p.assigned_nonces, 'warn': DOUBLE '0.01', 'crit': DOUBLE '0.05'},
    {'code': 'timeouts_undecided', 'part': p.timeouts_undecided, 'whole': p.timeouts_decided, 'warn': DOUBLE '0.10', 'crit': DOUBLE '0.50'},
    {'code': 'throttled_by_gateway', 'part': p.throttled_ghosts, 'whole': p.assigned_nonces, 'warn': DOUBLE '0.10', 'crit': NULL::DOUBLE},
    {'code': 'quarantined_by_gateway', 'part': p.quarantined_ghosts, 'whole': p.assigned_nonces, 'warn': DOUBLE '0.10', 'crit': NULL::DOUBLE},
    {'code': 'reasons_unknown', 'part': p.unknown_reasons, 'whole': p.assigned_nonces, 'warn': DOUBLE '0.05', 'crit': NULL::DOUBLE},
    {'code': 'slow_receipts', 'part': p.slow_receipt, 'whole': p.delivered_outside_poc + p.unfinished_outside_poc, 'warn': DOUBLE '0.10', 'crit': NULL::DOUBLE},
    {'code': 'slow_chunks', 'part': p.slow_chunk, 'whole': p.delivered_outside_poc, 'warn': DOUBLE '0.10', 'crit': NULL::DOUBLE},
    {'code': 'clock_drift', 'part': p.clock_drifted, 'whole': p.delivered + p.unfinished_refused + p.unfinished_execution, 'warn': DOUBLE '0.05', 'crit': NULL::DOUBLE},
    {'code': 'slow_decode', 'part': p.slow_decode, 'whole': p.delivered_outside_poc, 'warn': DOUBLE '0.10', 'crit': NULL::DOUBLE},
    {'code': 'logprobs_not_token_ids', 'part': p.logprobs_decoded, 'whole': p.delivered, 'warn': DOUBLE '0.001', 'crit': DOUBLE '0.01'}
  ]) AS u(f)
)
SELECT epoch_id, participant, model, code,
       CASE WHEN crit IS NOT NULL AND part >= crit * whole THEN 'critical' ELSE 'warning' END AS severity,
       part, whole, part / whole AS rate, warn AS warning_threshold, crit AS critical_threshold
FROM rates
WHERE whole >= 20 AND part > 0 AND part >= warn * whole;

-- The tracker against session storage, per escrow held by both: protocol_invalid vs inferences
-- invalidated, protocol_misses vs misses (timeouts and error misses; a record timed out by the
-- settlement drain is not a miss) with the executor as the participant; on ledgers of PR #1757's
-- build also protocol_validated / protocol_finished vs the same counters from the diff log up to the
-- ledger's latest_nonce: validated drops when a challenge takes passes back, so a diff log further along
-- than the ledger's flush is not a disagreement (docs/sources.md, PR #1757's counters).
CREATE OR REPLACE VIEW tracker_cross_checks AS
WITH ledger AS (
  SELECT e.epoch_id, e.escrow_id, e.latest_nonce AS ledger_nonce, s.address AS participant, (sum(coalesce(h.invalid, 0)))::BIGINT AS protocol_invalid,
         (sum(coalesce(h.missed, 0)))::BIGINT AS protocol_misses,
         sum(h.protocol_validated)::BIGINT AS protocol_validated, sum(h.protocol_finished)::BIGINT AS protocol_finished
  FROM ledger_escrows e JOIN ledger_slots s USING (escrow_id)
  LEFT JOIN ledger_host_stats h ON h.escrow_id = s.escrow_id AND h.slot_id = s.slot_id
  WHERE e.escrow_id IN (SELECT escrow_id FROM d_escrows)
  GROUP BY ALL
),
session AS (
  SELECT escrow_id, executor AS participant, count(*) FILTER (WHERE status = 'invalidated') AS invalidated,
         count(*) FILTER (WHERE miss_kind IS NOT NULL) AS timed_out
  FROM d_inferences GROUP BY ALL
),
counters AS (  -- PR #1757's counters from the diff log up to the ledger's nonce (inference_counter_nonces)
  SELECT c.escrow_id, sl.address AS participant,
         sum(CASE WHEN coalesce(c.challenge_nonce <= n.upto, FALSE) THEN coalesce(c.cleared_nonce <= n.upto, FALSE)::BIGINT
                  ELSE len(list_filter(c.pass_nonces, lambda x: x <= n.upto)) END)::BIGINT AS validated,
         count(*) FILTER (WHERE c.finish_nonce <= n.upto) AS finished
  FROM inference_counter_nonces c
  JOIN (SELECT DISTINCT escrow_id, coalesce(ledger_nonce, 9223372036854775807) AS upto FROM ledger) n
    ON n.escrow_id = c.escrow_id
  JOIN d_escrow_slots sl ON sl.escrow_id = c.escrow_id AND sl.slot_id = c.executor_slot
  GROUP BY ALL
)
SELECT l.epoch_id, l.escrow_id, l.participant, u.check_name, u.tracker, u.session, u.tracker - u.session AS difference,
       u.tracker = u.session AS agrees
FROM ledger l
LEFT JOIN session s USING (escrow_id, participant)
LEFT JOIN counters k USING (escrow_id, participant)
CROSS JOIN UNNEST([
  {'check_name': 'protocol_invalid vs invalidated', 'tracker': l.protocol_invalid, 'session': coalesce(s.invalidated, 0)},
  {'check_name': 'protocol_misses vs timed_out', 'tracker': l.protocol_misses, 'session': coalesce(s.timed_out, 0)},
  {'check_name': 'protocol_validated vs validated', 'tracker': l.protocol_validated, 'session': coalesce(k.validated, 0)},
  {'check_name': 'protocol_finished vs finished', 'tracker': l.protocol_finished, 'session': coalesce(k.finished, 0)}
]) AS t(u)
WHERE u.tracker IS NOT NULL;  -- the #1757 checks only where the ledger has those columns

CREATE OR REPLACE VIEW tracker_disagreements AS
SELECT epoch_id, escrow_id, participant, check_name, tracker, session, difference
FROM tracker_cross_checks WHERE NOT agrees;

CREATE OR REPLACE VIEW answer_checks AS
SELECT a.epoch_id, a.escrow_id, a.inference_id, i.executor, a.temperature, a.top_p, a.completion_tokens,
       a.logprob_tokens, a.duplicate_top_logprob_positions, a.nan_logprobs, a.missing_logprobs, a.tokens_not_ids,
       a.empty, a.sse, a.complete,
       CASE WHEN a.temperature IS NULL THEN NULL WHEN a.temperature = 0 THEN 'greedy' ELSE 'sampled' END AS sampling,
       a.completion_tokens IS DISTINCT FROM a.logprob_tokens AND a.complete AS token_count_mismatch,
       a.model, a.temperature_given, a.top_p_given, a.max_tokens, a.logprobs_requested, a.top_logprobs,
       a.stream_requested, a.prompt_tokens, a.response_bytes, a.problem, i.started_at, i.executor_build, i.status,
       a.payload_format, a.seed_given, a.min_tokens, a.logprobs_mode
FROM answer_checks_t a
LEFT JOIN inferences i ON i.escrow_id = a.escrow_id AND i.inference_id = a.inference_id;

COMMENT ON VIEW tracker_counter_rows IS 'Accounting-ledger counter rows (summed across writers) and saved accounting-API counters, attributed to (epoch, participant, model) through the escrow slot list; counter_key parsed (known fields as columns, raw JSON in key_json). origin = ledger | api.';
COMMENT ON VIEW tracker_participants IS 'The gateway tracker''s per-participant record per (epoch, participant, model), summed over every slot the participant holds: assigned_nonces (nonces 1..latest with nonce mod N = slot, protocol-only included), dispositions, delivered (finished_* without warm-up probes), flag counts slow_decode/slow_chunk/slow_receipt (PoC phase and warm-up excluded), clock_drifted/logprobs_decoded (warm-up excluded), protocol_misses / protocol_invalid (host stats), unresolved_challenges; chain_* columns from saved chain REST JSON. origin = ledger (a ledger database) or api (saved API responses, used only where no ledger row exists).';
COMMENT ON VIEW tracker_findings IS 'Findings recomputed from tracker_participants (never stored upstream): code, severity (warning|critical), part, whole, rate and thresholds of the newer build; no finding when whole < 20.';
COMMENT ON VIEW tracker_cross_checks IS 'Per escrow held by both the ledger and session storage: the tracker''s protocol_invalid against inferences invalidated and protocol_misses against misses (timeouts and error misses, drained records excluded; executor = participant); on ledgers of PR #1757''s build also protocol_validated and protocol_finished against the same counters from the diff log up to the ledger''s latest_nonce (inference_counter_nonces; the whole log where the ledger states none), so a validated count that dropped after the ledger''s flush (a challenge took passes back) is no disagreement; agrees = equal.';
COMMENT ON VIEW tracker_disagreements IS 'The rows of tracker_cross_checks where the tracker and session storage disagree.';
COMMENT ON VIEW answer_checks IS 'One row per stored answer (payload storage): sampling parameters of the request (absent = API defaults temperature 1, top_p 1; sampling = greedy when temperature is 0), usage.completion_tokens, logprob entries, positions whose top_logprobs repeat a token, NaN / missing logprobs, tokens that are not numeric ids, empty answers, sse = streamed response, complete = parsed to the end; payload_format = where the answer was stored: postgres (payload_storage), json or json_zst (payload files; a .json.zst is read in preference to a .json of the same answer, as upstream does). A file in a payload directory that is no payload is a quarantine row naming it. Bodies are not stored. seed_given, min_tokens, logprobs_mode = what the stored (client''s) request sets of the parameters devshardd injects before execution (logprobs, top_logprobs 5, min_tokens 64, seed = int32(inference_id) unless given, logprobs_mode processed_logprobs).';
