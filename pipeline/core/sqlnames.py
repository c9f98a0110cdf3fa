"""SQL identifiers from data (a table a copy holds, a column a query returns), quoted so that any name,
a ``"`` in it included, names exactly itself."""

from __future__ import annotations


def quote_ident(name: str) -> str:
    """``name`` as a double-quoted SQL identifier (SQLite, PostgreSQL and DuckDB alike)."""
    return '"' + name.replace('"', '""') + '"'
