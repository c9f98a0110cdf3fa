-- Per-slot host stats of each escrow's latest checkpoint (snapshots.state_data), side by side with the
-- same stats derived from the diff log up to the checkpoint nonce and with the accounting ledger's
-- mirror. The checkpoint carries the slot's history before an import; the diff log does not.

CREATE OR REPLACE VIEW snapshot_host_stats AS
WITH esc AS (
  SELECT e.escrow_id, e.epoch_id, e.group_size, e.latest_nonce, e.finalize_nonce + e.group_size AS settlement_nonce,
         nullif(s.imported_nonce, 0) AS imported_nonce, p.snapshot_nonce, p.phase,  -- 0 and NULL: not imported
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
)
SELECT e.epoch_id, e.escrow_id, h.slot_id, sl.address, e.snapshot_nonce, e.imported_nonce,
       h.missed, h.invalid, h.cost,
       coalesce(l.missed, 0) AS log_missed, coalesce(l.invalid, 0) AS log_invalid, coalesce(l.cost, 0) AS log_cost,
       lh.missed AS ledger_missed, lh.invalid AS ledger_invalid, lh.cost AS ledger_cost,
       (h.missed, h.invalid, h.cost) = (coalesce(l.missed, 0), coalesce(l.invalid, 0), coalesce(l.cost, 0)) AS agrees_log,
       -- The ledger holds the latest state: comparable only with a checkpoint at the latest nonce.
       CASE WHEN lh.escrow_id IS NOT NULL AND e.snapshot_nonce >= e.latest_nonce
            THEN (h.missed, h.invalid, h.cost) = (lh.missed, lh.invalid, lh.cost) END AS agrees_ledger,
       coalesce(e.imported_nonce, 0) > 0 AS history_before_import
FROM raw_snapshot_host_stats h
JOIN esc e USING (escrow_id)
LEFT JOIN d_escrow_slots sl ON sl.escrow_id = h.escrow_id AND sl.slot_id = h.slot_id
LEFT JOIN log l ON l.escrow_id = h.escrow_id AND l.slot_id = h.slot_id
LEFT JOIN ledger_host_stats lh ON lh.escrow_id = h.escrow_id AND lh.slot_id = h.slot_id;

CREATE OR REPLACE VIEW snapshot_host_stats_disagreements AS
SELECT * FROM snapshot_host_stats WHERE NOT agrees_log OR NOT coalesce(agrees_ledger, TRUE);

COMMENT ON VIEW snapshot_host_stats IS 'Per slot of each escrow''s latest checkpoint (snapshots.state_data): the session HostStats missed, invalid and cost as the host stored them (including history before an import, imported_nonce > 0), log_* = the same stats derived from the diff log up to snapshot_nonce (misses = timeouts and error misses; invalid = invalidated by votes; cost = what finishes paid, less invalidated and error-missed answers, plus records paid by the settlement drain), ledger_* = the accounting ledger''s mirror (latest flush, not the checkpoint nonce); agrees_log / agrees_ledger = all three equal (agrees_ledger NULL without a ledger row or when the checkpoint is older than the escrow''s latest nonce, which the ledger reflects); history_before_import = the diff log starts after imported_nonce, so it cannot hold the whole history.';
COMMENT ON VIEW snapshot_host_stats_disagreements IS 'The rows of snapshot_host_stats where the checkpoint disagrees with the diff log or with the ledger.';
