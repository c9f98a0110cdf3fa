-- Engine events of the host (start cycles and readiness; deaths come from engine_deaths).
-- params: $host
SELECT e."at", e.kind, coalesce(e.build, 'unattributed') AS build, e.record_key, e.cycle_start
FROM engine_events e
WHERE e.host = $host
ORDER BY e."at", e.line
