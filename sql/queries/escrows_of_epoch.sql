-- name: escrows_of_epoch
-- description: The escrows of one epoch: model, group size, status, settlement time, and their inferences (total and by the given host).
-- params: epoch (epoch number), host (gonka1… address)
SELECT e.escrow_id, e.model, e.group_size, e.status, e.settled_at,
       count(i.inference_id) AS inferences,
       count(i.inference_id) FILTER (i.executor = $host) AS by_host
FROM escrows e LEFT JOIN inferences i USING (escrow_id)
WHERE e.epoch_id = $epoch::BIGINT
GROUP BY ALL
ORDER BY e.escrow_id
