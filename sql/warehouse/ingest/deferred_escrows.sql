-- The escrows a deferred derive takes (registered as deferred_escrows), with the diffs the warehouse holds
-- of each: what its groups are bounded by.
SELECT e.escrow_id, count(d.nonce) AS n FROM deferred_escrows e
LEFT JOIN raw_diffs d USING (escrow_id) GROUP BY ALL ORDER BY ALL
