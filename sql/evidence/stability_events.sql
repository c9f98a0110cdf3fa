-- Engine events of the host with whether the same record is also an out-of-memory error.
-- params: $host
SELECT e."at", e.kind, coalesce(e.build, 'unattributed') AS build, e.record_key,
       EXISTS (SELECT 1 FROM engine_events o WHERE o.host = e.host AND o.record_key = e.record_key AND o.kind = 'oom') AS is_oom
FROM engine_events e
WHERE e.host = $host
ORDER BY e."at", e.line
