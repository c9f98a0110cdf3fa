"""Query execution (execute: named and ad-hoc SQL on the sandboxed warehouse, streamed to a sink) and the
output formats of `query` (formats: table, csv, json, markdown, parquet)."""
