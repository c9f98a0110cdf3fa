-- The diff cursor of every escrow with stored diffs: the highest nonce stored.
SELECT escrow_id, max(nonce) AS cursor FROM raw_diffs GROUP BY escrow_id
