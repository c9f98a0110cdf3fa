-- The catalog's change marker: every table and column of the copy (sources/postgres/catalog.sql goes
-- in below), in an order that does not depend on the database's collation.
SELECT 'catalog' AS part,
       md5(string_agg(table_name || '.' || column_name, ',' ORDER BY table_name COLLATE "C", column_name COLLATE "C")) AS marker
FROM ({catalog}
) c
