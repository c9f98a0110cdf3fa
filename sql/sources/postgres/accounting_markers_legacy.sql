-- How many leftover legacy blob rows a ledger holds (a ledger created in the row layout has no such table).
UNION ALL
SELECT 'legacy_blobs=' || count(*)::text FROM accounting_escrows
