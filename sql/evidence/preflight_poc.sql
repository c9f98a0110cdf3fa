-- The host's PoC lines in vLLM logs for the preflight's PoC coupling check, per build (the build at the line,
-- as-of join of host_builds): windows = `PoC stopped` / `PoC generation crashed` lines, empty_windows = those
-- that stopped with 0 nonces or crashed (the first one's time and record), batch_size = the largest
-- `PoC /generate: …, batch_size=B` stated (and its record). params: $host, $since, $until (NULL = unbounded)
WITH stops AS (
  SELECT coalesce(build, 'unattributed') AS build, "at", record_key,
         detail LIKE 'PoC stopped: 0 nonces%' OR detail LIKE 'PoC generation crashed%' AS empty
  FROM engine_events
  WHERE host = $host AND kind = 'poc_stop'
    AND ($since::TIMESTAMPTZ IS NULL OR "at" >= $since)
    AND ($until::TIMESTAMPTZ IS NULL OR "at" < $until)
),
batches AS (
  SELECT coalesce(CASE WHEN b.valid_to IS NULL OR f."at" < b.valid_to THEN b.build END, 'unattributed') AS build,
         TRY_CAST(f.value AS BIGINT) AS batch_size, f.record_key
  FROM log_start_facts f
  ASOF LEFT JOIN host_builds_t b ON b.host = f.host AND f."at" >= b.valid_from
  WHERE f.host = $host AND f.key = 'poc_batch_size'
    AND ($since::TIMESTAMPTZ IS NULL OR f."at" >= $since)
    AND ($until::TIMESTAMPTZ IS NULL OR f."at" < $until)
),
w AS (
  SELECT build, count(*) AS windows, count(*) FILTER (empty) AS empty_windows,
         min("at") FILTER (empty) AS first_empty_at, arg_min(record_key, "at") FILTER (empty) AS first_empty_record
  FROM stops GROUP BY build
),
bs AS (
  SELECT build, max(batch_size) AS batch_size, arg_max(record_key, batch_size) AS batch_record
  FROM batches GROUP BY build
)
SELECT coalesce(w.build, bs.build) AS build, coalesce(w.windows, 0) AS windows,
       coalesce(w.empty_windows, 0) AS empty_windows, w.first_empty_at, w.first_empty_record,
       bs.batch_size, bs.batch_record
FROM w FULL OUTER JOIN bs ON bs.build = w.build
