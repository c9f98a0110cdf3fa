-- Engine deaths and restarts of the host from its vLLM logs, defined as in the stability table: a
-- death is a row of engine_deaths (one crash, however many processes report it); a restart is an
-- engine initialization after the host's logs already show the engine (an earlier event or stats line).
-- params: $host, $since, $until (the window's time bounds, NULL = unbounded)
WITH seen AS (
  SELECT min("at") AS first_at
  FROM (SELECT "at" FROM engine_events WHERE host = $host
        UNION ALL SELECT "at" FROM engine_stats WHERE host = $host AND source = 'log')
)
SELECT e."at", e.death, e.restart
FROM (SELECT "at", true AS death, false AS restart FROM engine_deaths WHERE host = $host
      UNION ALL
      SELECT s."at", false, s."at" > seen.first_at FROM engine_events s, seen WHERE s.host = $host AND s.cycle_start) e
WHERE ($since::TIMESTAMPTZ IS NULL OR e."at" >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR e."at" < $until)
