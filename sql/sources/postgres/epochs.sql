-- Epochs present in the session store (every epoch partition holds its escrows' sessions).
SELECT DISTINCT epoch_id::bigint AS epoch_id FROM devshard_sessions ORDER BY 1
