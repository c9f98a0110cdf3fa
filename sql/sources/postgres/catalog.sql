-- Columns of every table in the search path that is not a partition child
-- (children of partitioned parents are read through their parent).
SELECT c.table_name::text AS table_name, c.column_name::text AS column_name
FROM information_schema.columns c
JOIN pg_class k ON k.relname = c.table_name
JOIN pg_namespace n ON n.oid = k.relnamespace AND n.nspname = c.table_schema
WHERE c.table_schema = current_schema()
  AND NOT k.relispartition
ORDER BY c.table_name, c.ordinal_position
