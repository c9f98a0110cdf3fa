-- name: drained_inferences
-- description: Records drained at settlement per epoch and escrow: pre-drain status and drain outcome (unchanged, refunded, paid; NULL = the copy does not tell or copies disagree).
-- params: none
SELECT epoch_id, escrow_id, pre_drain_status, drain_outcome, status, count(*) AS inferences
FROM inferences
WHERE drained
GROUP BY ALL
ORDER BY epoch_id, escrow_id, pre_drain_status, drain_outcome
