-- What an ingest of a session store decides by in the warehouse, as one digest (pipeline/reingest.py):
-- every escrow's stored progress with the copy and run that stored it, the escrow cache, the ledger's
-- escrows, the ledger marker and the schema, and how many stored answers were checked. A write of any
-- source that could make an ingest of an unchanged copy do something moves it. (DuckDB's `hash`: the
-- digest is only compared within one warehouse, and a new DuckDB that hashes differently costs one full
-- re-ingest, never a missed change.)
SELECT md5(concat_ws('|',
  (SELECT count(*) || ':' || coalesce(sum(hash(escrow_id, epoch_id, latest_nonce, status, settled_at, source_id, run_id)), 0)
   FROM raw_sessions),
  (SELECT count(*) || ':' || coalesce(sum(hash(escrow_id, epoch_id, escrow_json, cached_at)), 0) FROM raw_escrow_cache),
  (SELECT count(*) || ':' || coalesce(sum(hash(escrow_id, latest_nonce, source_id, run_id)), 0) FROM ledger_escrows),
  (SELECT count(*) FROM answer_checks_t),
  (SELECT coalesce(string_agg(key || '=' || value, ',' ORDER BY key), '') FROM warehouse_meta
   WHERE key IN ('ledger_marker', 'schema_digest'))
)) AS state
