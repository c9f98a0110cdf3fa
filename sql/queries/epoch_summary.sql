-- name: epoch_summary
-- description: Per epoch: escrows, inferences by status, drained records, and validation verdicts (valid / invalid).
-- Records drained at settlement are counted only under drained, whatever status the drain left them in, as the
-- epoch report's overview counts them. finished_no_verdict and challenged_unresolved are final statuses (status
-- finished, status challenged), named as the overview names them: evidence epoch-summary's finished (a finish
-- transaction) and challenged (ever challenged) are other counts.
-- params: none
WITH s AS (
  SELECT epoch_id,
         count(*) AS inferences,
         count(*) FILTER (status = 'pending' AND NOT drained) AS pending,
         count(*) FILTER (status = 'started' AND NOT drained) AS started,
         count(*) FILTER (status = 'finished' AND NOT drained) AS finished_no_verdict,
         count(*) FILTER (status = 'challenged' AND NOT drained) AS challenged_unresolved,
         count(*) FILTER (status = 'validated' AND NOT drained) AS validated,
         count(*) FILTER (status = 'invalidated' AND NOT drained) AS invalidated,
         count(*) FILTER (status = 'timed_out' AND NOT drained) AS timed_out,
         count(*) FILTER (drained) AS drained
  FROM inferences GROUP BY epoch_id
), v AS (
  SELECT epoch_id, count(*) FILTER (valid) AS validations_valid, count(*) FILTER (NOT valid) AS validations_invalid
  FROM validations GROUP BY epoch_id
), e AS (
  SELECT epoch_id, count(*) AS escrows FROM escrows GROUP BY epoch_id
)
SELECT e.epoch_id AS epoch, e.escrows, coalesce(s.inferences, 0) AS inferences,
       coalesce(s.pending, 0) AS pending, coalesce(s.started, 0) AS started,
       coalesce(s.finished_no_verdict, 0) AS finished_no_verdict,
       coalesce(s.challenged_unresolved, 0) AS challenged_unresolved, coalesce(s.validated, 0) AS validated,
       coalesce(s.invalidated, 0) AS invalidated, coalesce(s.timed_out, 0) AS timed_out, coalesce(s.drained, 0) AS drained,
       coalesce(v.validations_valid, 0) AS validations_valid, coalesce(v.validations_invalid, 0) AS validations_invalid
FROM e LEFT JOIN s USING (epoch_id) LEFT JOIN v USING (epoch_id)
ORDER BY epoch
