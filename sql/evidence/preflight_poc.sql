-- The host's PoC lines in vLLM logs for the preflight's PoC coupling check, one row per line (the checks
-- attribute them to builds by time, as their start cycles): what = 'stop' for a `PoC stopped` / `PoC generation
-- crashed` line (empty = it stopped with 0 nonces or crashed), 'batch' for a line stating the PoC batch (the
-- mining path's `PoC /init/generate: … batch_size=B …` and `PoC /generate: block_hash=… batch_size=B …`, the
-- wait path's `PoC /generate: N nonces, batch_size=B, …`; start fact poc_batch_size).
-- params: $host, $since, $until (NULL = unbounded)
SELECT 'stop' AS what, "at", record_key,
       detail LIKE 'PoC stopped: 0 nonces%' OR detail LIKE 'PoC generation crashed%' AS empty,
       NULL::BIGINT AS batch_size
FROM engine_events
WHERE host = $host AND kind = 'poc_stop'
  AND ($since::TIMESTAMPTZ IS NULL OR "at" >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR "at" < $until)
UNION ALL
SELECT 'batch', "at", record_key, NULL, TRY_CAST(value AS BIGINT)
FROM log_start_facts
WHERE host = $host AND key = 'poc_batch_size'
  AND ($since::TIMESTAMPTZ IS NULL OR "at" >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR "at" < $until)
ORDER BY "at", record_key
