-- What the warehouse already holds per escrow: its session progress and the copy that stored it.
SELECT escrow_id, latest_nonce, status, settled_at, source_id FROM raw_sessions
