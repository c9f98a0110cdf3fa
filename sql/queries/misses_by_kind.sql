-- name: misses_by_kind
-- description: Misses per epoch and executor, split into refusals, execution timeouts and error misses (MsgErrorMiss or a reason-3 timeout); drained records are never misses.
-- params: none
SELECT epoch_id, executor,
       count(*) FILTER (WHERE miss_kind = 'refused') AS refused,
       count(*) FILTER (WHERE miss_kind = 'execution') AS execution,
       count(*) FILTER (WHERE miss_kind = 'error_miss') AS error_miss,
       count(*) FILTER (WHERE miss_kind IS NOT NULL) AS misses
FROM inferences
GROUP BY ALL
HAVING count(*) FILTER (WHERE miss_kind IS NOT NULL) > 0
ORDER BY epoch_id, executor
