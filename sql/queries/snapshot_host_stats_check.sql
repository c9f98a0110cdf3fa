-- name: snapshot_host_stats_check
-- description: Checkpoint host stats (missed, invalid, cost per slot) that disagree with the diff log or the accounting ledger; history_before_import marks escrows joined by import.
-- params: none
SELECT epoch_id, escrow_id, slot_id, address, snapshot_nonce, imported_nonce,
       missed, log_missed, ledger_missed, invalid, log_invalid, ledger_invalid, cost, log_cost, ledger_cost,
       agrees_log, agrees_ledger, history_before_import
FROM snapshot_host_stats_disagreements
ORDER BY epoch_id, escrow_id, slot_id
