-- Escrows whose diff log is partial (nonces of 1 .. latest_nonce that no copy held) or whose copies
-- disagree (forked diffs, conflicting real seals), in a window: the escrows of epoch $epoch, or with an
-- inference started in [$since, $until), or all (every bound NULL). For footers and `doctor`.
-- params: $epoch, $since, $until
SELECT s.epoch_id, c.escrow_id, c.latest_nonce, c.missing_nonces, c.missing_ranges, c.forked_nonces,
       c.conflicting_seals, coalesce(c.conflicting_signatures, 0) AS conflicting_signatures, c.complete, c.conflicted
FROM d_escrow_coverage c JOIN raw_sessions s USING (escrow_id)
WHERE (NOT c.complete OR c.conflicted)
  AND ($epoch IS NULL OR s.epoch_id = $epoch)
  AND ($since IS NULL OR EXISTS (SELECT 1 FROM d_inferences i WHERE i.escrow_id = c.escrow_id
                                 AND i.started_at >= $since AND i.started_at < $until))
ORDER BY s.epoch_id, c.escrow_id
