-- One session row per escrow, the copy's that ranks first whatever order copies come in: further along
-- (latest_nonce), then settled, then with more of the log (no or an earlier import), then the source id
-- that sorts first.
INSERT INTO raw_sessions BY NAME (SELECT * FROM new_sessions)
ON CONFLICT (escrow_id) DO UPDATE SET
  epoch_id = excluded.epoch_id, version = excluded.version, creator_addr = excluded.creator_addr,
  config_json = excluded.config_json, group_json = excluded.group_json, initial_balance = excluded.initial_balance,
  latest_nonce = excluded.latest_nonce, last_finalized = excluded.last_finalized, status = excluded.status,
  settled_at = excluded.settled_at, imported_nonce = excluded.imported_nonce, source_id = excluded.source_id,
  run_id = excluded.run_id
WHERE (coalesce(excluded.latest_nonce, 0), coalesce(excluded.status = 'settled', FALSE),
       -coalesce(excluded.imported_nonce, 0), raw_sessions.source_id IS NULL OR excluded.source_id <= raw_sessions.source_id)
   >= (coalesce(raw_sessions.latest_nonce, 0), coalesce(raw_sessions.status = 'settled', FALSE),
       -coalesce(raw_sessions.imported_nonce, 0), TRUE)
