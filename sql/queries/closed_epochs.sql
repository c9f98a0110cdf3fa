-- name: closed_epochs
-- description: Per epoch: escrows, settled escrows, last settlement, and when the epoch counts as closed (all escrows settled, or finality lag after its last settlement on the data clock = newest copy time).
-- params: lag_seconds (finality lag in seconds, e.g. 21600 for 6h)
WITH clock AS (
  SELECT max(copy_at) AS data_clock FROM ingest_runs WHERE status = 'ok'
), e AS (
  SELECT epoch_id, count(*) AS escrows, count(*) FILTER (status = 'settled' AND settled_at IS NOT NULL) AS escrows_settled,
         max(settled_at) AS last_settled_at
  FROM escrows GROUP BY epoch_id
)
SELECT e.epoch_id, e.escrows, e.escrows_settled, e.last_settled_at, clock.data_clock,
       CASE WHEN e.escrows_settled = e.escrows THEN e.last_settled_at
            WHEN e.last_settled_at + to_seconds($lag_seconds::DOUBLE) <= clock.data_clock
              THEN e.last_settled_at + to_seconds($lag_seconds::DOUBLE)
       END AS closed_at,
       CASE WHEN e.escrows_settled = e.escrows THEN 'all escrows settled'
            WHEN e.last_settled_at + to_seconds($lag_seconds::DOUBLE) <= clock.data_clock THEN 'finality lag'
       END AS closed_by
FROM e CROSS JOIN clock
ORDER BY e.epoch_id
