-- Per epoch and executor of one partition warehouse: answers, challenged or invalidated answers, invalidated
-- answers and misses by kind (the network `executors` table sums these over the partitions of a lake).
-- answers = inferences with a finish transaction whose final status is not timed_out (as in peer_answers.sql);
-- misses by miss_kind (refused, execution, error_miss; drained records are never misses).
-- params: $epoch (NULL = every epoch)
SELECT epoch_id, executor,
       count(*) FILTER (WHERE finished AND status <> 'timed_out') AS answers,
       count(*) FILTER (WHERE finished AND status <> 'timed_out' AND (challenged OR status = 'invalidated'))
         AS challenged_or_invalidated,
       count(*) FILTER (WHERE finished AND status = 'invalidated') AS invalidated,
       count(*) FILTER (WHERE miss_kind = 'refused') AS misses_refused,
       count(*) FILTER (WHERE miss_kind = 'execution') AS misses_execution,
       count(*) FILTER (WHERE miss_kind = 'error_miss') AS misses_error
FROM inferences
WHERE executor IS NOT NULL AND ($epoch::BIGINT IS NULL OR epoch_id = $epoch)
GROUP BY ALL
