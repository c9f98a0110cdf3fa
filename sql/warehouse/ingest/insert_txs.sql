-- The transactions of the diffs this run stored (not of a fork's other version, nor of diffs held before):
-- their keys are new to tx_log, so a plain INSERT (tx_log has no key index: its rows come only from here).
INSERT INTO tx_log BY NAME (
  SELECT t.* FROM new_txs t JOIN raw_diffs r USING (escrow_id, nonce)
  WHERE r.run_id = $run_id)
