-- The ledger's change marker: its own change markers (sources/postgres/accounting_markers.sql goes in
-- below), in an order that does not depend on the database's collation.
SELECT 'ledger' AS part, md5(string_agg(marker, E'\n' ORDER BY marker COLLATE "C")) AS marker
FROM ({ledger}
) m
