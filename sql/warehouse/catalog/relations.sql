-- The public views and the commented tables of the warehouse, with their COMMENT ON text (docs/schema.md).
SELECT view_name AS name, 'view' AS kind, comment FROM duckdb_views()
WHERE NOT internal AND schema_name = 'main'
UNION ALL
SELECT table_name, 'table', comment FROM duckdb_tables() WHERE schema_name = 'main' AND comment IS NOT NULL
ORDER BY name
