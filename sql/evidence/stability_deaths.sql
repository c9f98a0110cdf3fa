-- Engine deaths of the host (view engine_deaths: one row per crash, an OOM when its root cause is one).
-- params: $host
SELECT "at", coalesce(build, 'unattributed') AS build, oom
FROM engine_deaths
WHERE host = $host
ORDER BY "at", line
