-- The rows of one table, named by $table.
-- params: $table
SELECT count(*) AS n
FROM query_table($table)
