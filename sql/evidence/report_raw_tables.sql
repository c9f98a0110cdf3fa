-- The warehouse's raw source tables (raw_<table>), whose row counts are the quarantine's denominators.
SELECT table_name
FROM duckdb_tables()
WHERE table_name LIKE 'raw\_%' ESCAPE '\'
ORDER BY table_name
