-- Engine deaths and restarts of the host from its vLLM logs, defined as in the stability table: a
-- death is a fatal-error record; a restart is an engine initialization after the host's logs
-- already show the engine (an earlier event or stats line).
-- params: $host, $since, $until (the window's time bounds, NULL = unbounded)
WITH seen AS (
  SELECT min("at") AS first_at
  FROM (SELECT "at" FROM engine_events WHERE host = $host
        UNION ALL SELECT "at" FROM engine_stats WHERE host = $host AND source = 'log')
)
SELECT e."at", e.kind = 'fatal' AS death, e.kind = 'start' AND e."at" > seen.first_at AS restart
FROM engine_events e, seen
WHERE e.host = $host AND e.kind IN ('fatal', 'start')
  AND ($since::TIMESTAMPTZ IS NULL OR e."at" >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR e."at" < $until)
