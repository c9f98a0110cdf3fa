-- Columns of every table in the current schema that is not a partition child (children of
-- partitioned parents are read through their parent). pg_catalog rather than
-- information_schema: the latter costs ~0.5 s on a copy with many partitions.
SELECT c.relname::text AS table_name, a.attname::text AS column_name
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE n.nspname = current_schema()
  AND c.relkind IN ('r', 'p')
  AND NOT c.relispartition
ORDER BY c.relname, a.attnum
