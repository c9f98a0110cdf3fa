-- For `doctor --warehouse`: the escrows one source gave diffs of whose diff log the warehouse holds only
-- in part (nonces no copy held) or whose copies disagree.
-- params: $source_id
SELECT s.epoch_id, c.escrow_id, c.latest_nonce, c.missing_nonces, c.missing_ranges, c.forked_nonces,
       c.conflicting_seals, coalesce(c.conflicting_signatures, 0) AS conflicting_signatures, c.complete, c.conflicted
FROM d_escrow_coverage c JOIN raw_sessions s USING (escrow_id)
WHERE (NOT c.complete OR c.conflicted)
  AND c.escrow_id IN (SELECT escrow_id FROM raw_diff_coverage WHERE source_id = $source_id
                      UNION SELECT escrow_id FROM raw_sessions WHERE source_id = $source_id)
ORDER BY s.epoch_id, c.escrow_id
