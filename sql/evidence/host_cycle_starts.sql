-- The start times of every start cycle of the host (engine_cycles), for `buildcheck.build_spans`: where the
-- boundaries of its build timeline are in its logs. params: $host
SELECT started_at FROM engine_cycles WHERE host = $host ORDER BY started_at
