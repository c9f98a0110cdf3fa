"""SQL identifiers and strings from data (a table a copy holds, a column a query returns, a value), quoted so
that any name or text, a quote in it included, stands exactly for itself."""

from __future__ import annotations


def quote_ident(name: str) -> str:
    """``name`` as a double-quoted SQL identifier (SQLite, PostgreSQL and DuckDB alike)."""
    return '"' + name.replace('"', '""') + '"'


def quote_string(text: str) -> str:
    """``text`` as a standard-conforming SQL string literal (PostgreSQL and DuckDB alike)."""
    return "'" + text.replace("'", "''") + "'"
