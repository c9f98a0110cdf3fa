-- Every column of the warehouse's tables and views, in declaration order (docs/schema.md).
SELECT table_name AS name, column_name, data_type FROM duckdb_columns()
WHERE schema_name = 'main' ORDER BY table_name, column_index
