-- Per escrow and address of one partition warehouse: the slots (vote weight) the address holds, with the
-- escrow's group size and vote threshold (the network `concentration` table reduces these over a lake).
-- params: $epoch (NULL = every epoch)
SELECT e.epoch_id, e.escrow_id, e.group_size, e.vote_threshold, s.address, count(*) AS slots
FROM escrows e JOIN escrow_slots s USING (escrow_id)
WHERE $epoch::BIGINT IS NULL OR e.epoch_id = $epoch
GROUP BY ALL
