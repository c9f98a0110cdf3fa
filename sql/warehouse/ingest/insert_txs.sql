-- The transactions of the diffs stored as this copy holds them (not of a fork's other version).
INSERT OR IGNORE INTO tx_log BY NAME (
  SELECT t.* FROM new_txs t JOIN raw_diffs r USING (escrow_id, nonce) JOIN new_diff_digests g USING (escrow_id, nonce)
  WHERE coalesce(r.digest, g.digest) = g.digest)
