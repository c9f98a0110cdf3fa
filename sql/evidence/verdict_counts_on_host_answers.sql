-- Verdicts (one per validation or vote transaction) on inferences the host executed, counted per
-- epoch and kind; selected by the same window as host_answer_counts.sql (on the inference's started_at).
-- params: $host, $epoch, $since, $until (NULL = unbounded)
SELECT epoch_id,
       count(*) FILTER (kind = 'validation' AND valid) AS validations_valid,
       count(*) FILTER (kind = 'validation' AND NOT valid) AS validations_invalid,
       count(*) FILTER (kind = 'vote' AND valid) AS votes_valid,
       count(*) FILTER (kind = 'vote' AND NOT valid) AS votes_invalid,
       count(*) FILTER (self_verdict) AS self_verdicts  -- cast by the executor's own address
FROM validations
WHERE executor = $host
  AND final_status IS NOT NULL  -- the judged inference is in the warehouse
  AND ($epoch::BIGINT IS NULL OR epoch_id = $epoch)
  AND ($since::TIMESTAMPTZ IS NULL OR inference_started_at >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR inference_started_at < $until)
GROUP BY epoch_id
