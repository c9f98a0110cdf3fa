-- Engine deaths and restarts of the host from its vLLM logs, defined as in the stability table: a
-- death is a row of engine_deaths (one crash, however many processes report it); a restart is a cycle start
-- after the host's logs already show the engine (engine_cycle_starts.restart).
-- params: $host, $since, $until (the window's time bounds, NULL = unbounded)
SELECT e."at", e.death, e.restart
FROM (SELECT "at", true AS death, false AS restart FROM engine_deaths WHERE host = $host
      UNION ALL
      SELECT "at", false, restart FROM engine_cycle_starts WHERE host = $host) e
WHERE ($since::TIMESTAMPTZ IS NULL OR e."at" >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR e."at" < $until)
