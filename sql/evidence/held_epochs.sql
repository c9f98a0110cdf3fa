-- The epochs the warehouse holds: of its escrows and of the gateway tracker's ledger and API records.
-- params: none
SELECT epoch_id FROM escrows WHERE epoch_id IS NOT NULL
UNION SELECT epoch_id FROM ledger_escrows WHERE epoch_id IS NOT NULL
UNION SELECT epoch_id FROM api_participants WHERE epoch_id IS NOT NULL
ORDER BY epoch_id
