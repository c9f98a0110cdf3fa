-- What the warehouse already holds per escrow: its session progress, the copy that stored it, and its diff cursor.
SELECT s.escrow_id, s.latest_nonce, s.status, s.settled_at, s.source_id, coalesce(d.max_nonce, 0) AS cursor
FROM raw_sessions s
LEFT JOIN (SELECT escrow_id, max(nonce) AS max_nonce FROM raw_diffs GROUP BY escrow_id) d USING (escrow_id)
