-- Engine events of the host (start cycles, restarts and readiness; deaths come from engine_deaths).
-- params: $host
SELECT e."at", e.kind, coalesce(e.build, 'unattributed') AS build, e.record_key, e.cycle_start,
       coalesce(c.restart, false) AS restart
FROM engine_events e
LEFT JOIN engine_cycle_starts c ON e.cycle_start AND c.host = e.host AND c.file_id = e.file_id AND c.line = e.line
WHERE e.host = $host
ORDER BY e."at", e.line
