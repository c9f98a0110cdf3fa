"""Stage 3, the warehouse: the DuckDB file, its schema and views, and its connections."""
