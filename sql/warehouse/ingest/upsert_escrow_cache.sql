INSERT INTO raw_escrow_cache BY NAME (SELECT * FROM new_escrow_cache)
ON CONFLICT (escrow_id) DO UPDATE SET epoch_id = excluded.epoch_id, escrow_json = excluded.escrow_json,
  cached_at = excluded.cached_at
WHERE coalesce(excluded.cached_at, 0) >= coalesce(raw_escrow_cache.cached_at, 0)
  -- a row that would stay as it is is not rewritten (a re-ingest of an unchanged copy writes nothing here)
  AND (excluded.epoch_id, excluded.escrow_json, excluded.cached_at)
      IS DISTINCT FROM (raw_escrow_cache.epoch_id, raw_escrow_cache.escrow_json, raw_escrow_cache.cached_at)
