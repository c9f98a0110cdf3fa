-- Per-slot host stats of each escrow's latest checkpoint (snapshots.state_data), side by side with the
-- same stats derived from the diff log up to the checkpoint nonce and with the accounting ledger's
-- mirror. The checkpoint carries the slot's history before an import; the diff log does not.

-- What PR #1757's per-slot counters count, per inference, as nonces of the diff log: the finish, each
-- passing sampled validation counted while Finished (one per address), the challenge and a
-- Challenged -> Validated resolution. validated = passes, less all of them once challenged, plus 1
-- when the challenge is cleared (docs/sources.md, blob encodings).
CREATE OR REPLACE VIEW inference_counter_nonces AS
WITH finishes AS (
  SELECT escrow_id, inference_id, min(nonce) AS finish_nonce FROM tx_log WHERE kind = 'finish' GROUP BY ALL
),
-- The challenge: the first counted invalid validation, by position in the log (nonce, then tx_index).
challenges AS (
  SELECT escrow_id, inference_id, min(nonce * 1000000 + tx_index) AS challenge_pos
  FROM d_validations WHERE kind = 'validation' AND NOT valid AND counted GROUP BY ALL
),
-- Passes are the valid validations counted before the challenge: under the late-validation rule set a
-- validation while Challenged is counted too, but in the challenge tally, not as a pass.
checks AS (
  SELECT v.escrow_id, v.inference_id,
         list(v.nonce ORDER BY v.nonce) FILTER (
           WHERE v.kind = 'validation' AND v.valid AND v.counted
             AND v.nonce * 1000000 + v.tx_index < coalesce(c.challenge_pos, 9223372036854775807)
         ) AS pass_nonces,
         any_value(c.challenge_pos // 1000000) AS challenge_nonce
  FROM d_validations v LEFT JOIN challenges c USING (escrow_id, inference_id) GROUP BY ALL
)
SELECT i.escrow_id, i.inference_id, i.executor_slot, f.finish_nonce, coalesce(c.pass_nonces, []) AS pass_nonces,
       c.challenge_nonce, CASE WHEN i.status = 'validated' AND c.challenge_nonce IS NOT NULL THEN i.resolved_nonce END
         AS cleared_nonce
FROM d_inferences i
LEFT JOIN finishes f ON f.escrow_id = i.escrow_id AND f.inference_id = i.inference_id AND i.finished
LEFT JOIN checks c ON c.escrow_id = i.escrow_id AND c.inference_id = i.inference_id;

CREATE OR REPLACE VIEW snapshot_host_stats AS
WITH esc AS (
  SELECT e.escrow_id, e.epoch_id, e.group_size, e.latest_nonce, e.finalize_nonce + e.group_size AS settlement_nonce,
         nullif(s.imported_nonce, 0) AS imported_nonce, p.snapshot_nonce, p.phase, p.checkpoint_format,  -- 0 and NULL: not imported
         coalesce(p.token_price, TRY_CAST(json_extract(s.config_json, '$.TokenPrice') AS BIGINT)) AS token_price
  FROM d_escrows e JOIN raw_sessions s USING (escrow_id) JOIN raw_snapshots p USING (escrow_id)
),
starts AS (
  SELECT escrow_id, inference_id, input_length + max_tokens AS reserved_tokens
  FROM tx_log WHERE kind = 'start'
),
paid AS (  -- what each finish paid the executor: tokens at the price, capped at the reserved cost
  SELECT f.escrow_id, f.inference_id, f.nonce AS finish_nonce,
         least((f.input_tokens + f.output_tokens) * e.token_price, st.reserved_tokens * e.token_price) AS cost
  FROM tx_log f JOIN esc e USING (escrow_id)
  LEFT JOIN starts st USING (escrow_id, inference_id)
  WHERE f.kind = 'finish'
),
log AS (
  SELECT i.escrow_id, i.executor_slot AS slot_id,
         count(*) FILTER (WHERE i.miss_kind IS NOT NULL AND i.miss_nonce <= e.snapshot_nonce) AS missed,
         count(*) FILTER (WHERE i.status = 'invalidated' AND i.resolved_nonce <= e.snapshot_nonce) AS invalid,
         (coalesce(sum(p.cost) FILTER (WHERE p.finish_nonce <= e.snapshot_nonce
             AND NOT coalesce(i.status = 'invalidated' AND i.resolved_nonce <= e.snapshot_nonce, FALSE)
             AND NOT coalesce(i.miss_kind = 'error_miss' AND i.miss_nonce <= e.snapshot_nonce, FALSE)), 0)
         + coalesce(sum(st.reserved_tokens * e.token_price) FILTER (WHERE i.drain_outcome = 'paid'
             AND e.settlement_nonce <= e.snapshot_nonce), 0))::BIGINT AS cost
  FROM d_inferences i JOIN esc e USING (escrow_id)
  LEFT JOIN paid p USING (escrow_id, inference_id)
  LEFT JOIN starts st USING (escrow_id, inference_id)
  GROUP BY ALL
),
counters AS (
  SELECT c.escrow_id, c.executor_slot AS slot_id,
         sum(CASE WHEN coalesce(c.challenge_nonce <= e.snapshot_nonce, FALSE)
                  THEN coalesce(c.cleared_nonce <= e.snapshot_nonce, FALSE)::BIGINT
                  ELSE len(list_filter(c.pass_nonces, lambda x: x <= e.snapshot_nonce)) END)::BIGINT AS validated,
         count(*) FILTER (WHERE c.finish_nonce <= e.snapshot_nonce) AS finished
  FROM inference_counter_nonces c JOIN esc e USING (escrow_id)
  GROUP BY ALL
)
SELECT e.epoch_id, e.escrow_id, h.slot_id, sl.address, e.snapshot_nonce, e.imported_nonce,
       h.missed, h.invalid, h.cost,
       coalesce(l.missed, 0) AS log_missed, coalesce(l.invalid, 0) AS log_invalid, coalesce(l.cost, 0) AS log_cost,
       lh.missed AS ledger_missed, lh.invalid AS ledger_invalid, lh.cost AS ledger_cost,
       -- PR #1757's counters are compared only where the checkpoint (or the ledger) carries them.
       (h.missed, h.invalid, h.cost) = (coalesce(l.missed, 0), coalesce(l.invalid, 0), coalesce(l.cost, 0))
         AND coalesce(h.validated = coalesce(k.validated, 0), TRUE)
         AND coalesce(h.finished = coalesce(k.finished, 0), TRUE) AS agrees_log,
       -- The ledger holds the latest state: comparable only with a checkpoint at the latest nonce.
       CASE WHEN lh.escrow_id IS NOT NULL AND e.snapshot_nonce >= e.latest_nonce
            THEN (h.missed, h.invalid, h.cost) = (lh.missed, lh.invalid, lh.cost)
                 AND coalesce(h.validated = lh.protocol_validated, TRUE)
                 AND coalesce(h.finished = lh.protocol_finished, TRUE) END AS agrees_ledger,
       coalesce(e.imported_nonce, 0) > 0 AS history_before_import,
       h.validated, h.finished,
       CASE WHEN h.validated IS NOT NULL OR h.finished IS NOT NULL THEN coalesce(k.validated, 0) END AS log_validated,
       CASE WHEN h.validated IS NOT NULL OR h.finished IS NOT NULL THEN coalesce(k.finished, 0) END AS log_finished,
       lh.protocol_validated AS ledger_validated, lh.protocol_finished AS ledger_finished,
       e.checkpoint_format
FROM raw_snapshot_host_stats h
JOIN esc e USING (escrow_id)
LEFT JOIN d_escrow_slots sl ON sl.escrow_id = h.escrow_id AND sl.slot_id = h.slot_id
LEFT JOIN log l ON l.escrow_id = h.escrow_id AND l.slot_id = h.slot_id
LEFT JOIN counters k ON k.escrow_id = h.escrow_id AND k.slot_id = h.slot_id
LEFT JOIN ledger_host_stats lh ON lh.escrow_id = h.escrow_id AND lh.slot_id = h.slot_id;

CREATE OR REPLACE VIEW snapshot_model_stats AS
SELECT m.epoch_id, m.escrow_id, m.slot_id, m.model, m.prompt_tokens, m.completion_tokens, m.inference_count, m.cost,
       sl.address, m.snapshot_nonce
FROM raw_snapshot_model_stats m
LEFT JOIN d_escrow_slots sl ON sl.escrow_id = m.escrow_id AND sl.slot_id = m.slot_id;

CREATE OR REPLACE VIEW snapshot_host_stats_disagreements AS
SELECT * FROM snapshot_host_stats WHERE NOT agrees_log OR NOT coalesce(agrees_ledger, TRUE);

COMMENT ON VIEW snapshot_host_stats IS 'Per slot of each escrow''s latest checkpoint (snapshots.state_data): the session HostStats missed, invalid and cost as the host stored them (including history before an import, imported_nonce > 0), log_* = the same stats derived from the diff log up to snapshot_nonce (misses = timeouts and error misses; invalid = invalidated by votes; cost = what finishes paid, less invalidated and error-missed answers, plus records paid by the settlement drain), ledger_* = the accounting ledger''s mirror (latest flush, not the checkpoint nonce); agrees_log / agrees_ledger = all three equal (agrees_ledger NULL without a ledger row or when the checkpoint is older than the escrow''s latest nonce, which the ledger reflects); history_before_import = the diff log starts after imported_nonce, so it cannot hold the whole history. validated / finished = PR #1757''s counters (HostStatsProto fields 7/8 as varints; NULL when the writer''s line has none): validated = passing sampled validations counted while Finished (one per address), less those of an inference once challenged, plus 1 when its challenge is cleared; finished = finish transactions applied for the slot; log_validated / log_finished = the same from the diff log up to snapshot_nonce (NULL where the checkpoint has no counters), ledger_validated / ledger_finished = the ledger''s protocol_validated / protocol_finished; agrees_log and agrees_ledger include them where both sides have them. checkpoint_format = protobuf | protobuf_rooted (behind the state-root prefix) | json (pre-devshard-v2 builds).';
COMMENT ON VIEW snapshot_model_stats IS 'Per-model rows of each escrow''s latest checkpoint, on the release line where HostStatsProto field 7 is model_stats (length-delimited): per slot and model, prompt and completion tokens, inference count and cost; address = the slot''s holder.';
COMMENT ON VIEW inference_counter_nonces IS 'Per inference, the diff-log nonces PR #1757''s counters follow: finish_nonce (the applied finish), pass_nonces (passing sampled validations counted while Finished, one per address), challenge_nonce, cleared_nonce (Challenged -> Validated); snapshot_host_stats and tracker_cross_checks sum them per executor slot.';
COMMENT ON VIEW snapshot_host_stats_disagreements IS 'The rows of snapshot_host_stats where the checkpoint disagrees with the diff log or with the ledger.';
