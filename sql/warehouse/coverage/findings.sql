-- Escrows whose diff log is partial (nonces of 1 .. latest_nonce that no copy held) or whose copies
-- disagree (forked diffs, conflicting real seals), of one epoch or of all ($epoch NULL).
-- params: $epoch
SELECT s.epoch_id, c.escrow_id, c.latest_nonce, c.missing_nonces, c.missing_ranges, c.forked_nonces,
       c.conflicting_seals, c.complete, c.conflicted
FROM d_escrow_coverage c JOIN raw_sessions s USING (escrow_id)
WHERE (NOT c.complete OR c.conflicted) AND ($epoch IS NULL OR s.epoch_id = $epoch)
ORDER BY s.epoch_id, c.escrow_id
