-- Whether the host has engine events at all (the empty-answer match needs them). params: $host
SELECT count(*)::BIGINT AS events, min("at") AS first_at, max("at") AS last_at
FROM engine_events
WHERE host = $host
