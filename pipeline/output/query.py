"""Ad-hoc and named queries on the warehouse views (read-only)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

from pipeline.core.paths import SQL_DIR
from pipeline.output import query_format as query_output
from pipeline.output.query_format import QueryFormat

QUERIES_DIR = SQL_DIR / "queries"
HEADER = re.compile(r"^--\s*(name|description|params):\s*(.*)$")


class QueryError(Exception):
    """A query the user wrote or named that cannot run; one-line message."""


@dataclass
class NamedQuery:
    name: str
    description: str
    params: str
    sql: str


def named_queries() -> dict[str, NamedQuery]:
    found = {}
    for path in sorted(QUERIES_DIR.glob("*.sql")):
        text = path.read_text()
        meta = {"name": path.stem, "description": "", "params": ""}
        for line in text.splitlines():
            m = HEADER.match(line.strip())
            if m:
                meta[m.group(1)] = m.group(2).strip()
        found[meta["name"]] = NamedQuery(meta["name"], meta["description"], meta["params"], text)
    return found


def resolve_sql(text: str | None, file: Path | None) -> str:
    """SQL from `--file`, a named query, or the text itself."""
    if file is not None:
        if not file.exists():
            raise QueryError(f"{file}: no such file")
        return file.read_text()
    if text is None:
        raise QueryError("give SQL, a query name (see `gonka-evidence query --list`) or --file")
    queries = named_queries()
    if text in queries:
        return queries[text].sql
    if re.fullmatch(r"[A-Za-z_][\w-]*", text):
        raise QueryError(f"no named query {text!r} (see `gonka-evidence query --list`)")
    return text


def parse_params(items: list[str]) -> dict[str, str]:
    """``--param k=v`` items as a dict."""
    params = {}
    for item in items:
        if "=" not in item:
            raise QueryError(f"--param {item!r} is not k=v")
        k, v = item.split("=", 1)
        params[k] = v
    return params


def _bound(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, str]) -> dict[str, str] | None:
    """The parameters ``sql`` uses ($name, as DuckDB parses it: not inside strings), checked to be all given."""
    used = {name for statement in con.extract_statements(sql) for name in statement.named_parameters}
    missing = used - set(params)
    if missing:
        raise QueryError(f"missing --param for: {', '.join(sorted(missing))}")
    return {k: v for k, v in params.items() if k in used} or None


def run_query(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, str]) -> pl.DataFrame:
    """The result of ``sql`` as a Polars frame, every value exact (see `query_output.to_frame`)."""
    try:
        relation = con.sql(sql, params=_bound(con, sql, params))
        if relation is None:
            raise QueryError("the statement returned no result to show (only queries do)")
        return query_output.to_frame(relation)
    except (duckdb.Error, ValueError) as exc:
        raise QueryError(str(exc).splitlines()[0]) from None


@dataclass
class RenderedQuery:
    data: str | bytes  # text without a final newline, or Parquet bytes
    rows: int
    columns: int
    hidden: list[str]  # columns the table left out to fit the terminal
    elapsed_s: float


def render_query(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    params: dict[str, str],
    fmt: QueryFormat,
    vertical: bool = False,
    width: int | None = None,
) -> RenderedQuery:
    """Run ``sql`` once and render its result exactly in ``fmt`` (see pipeline.output.query_format).
    ``width``: fit the table to this many terminal cells (None: every column, full width)."""
    started = time.perf_counter()
    try:
        relation = con.sql(sql, params=_bound(con, sql, params))
        if relation is None:
            raise QueryError("the statement returned no result to show (only queries do)")
        if fmt is QueryFormat.parquet:
            parquet, rows = query_output.to_parquet(relation)
            return RenderedQuery(parquet, rows, len(relation.columns), [], time.perf_counter() - started)
        cells = query_output.fetch_cells(relation)
    except duckdb.Error as exc:
        raise QueryError(str(exc).splitlines()[0]) from None
    hidden: list[str] = []
    if fmt is QueryFormat.csv:
        data = query_output.to_csv(cells)
    elif fmt is QueryFormat.json:
        data = query_output.to_json(cells)
    elif fmt is QueryFormat.markdown:
        data = query_output.to_markdown(cells)
    elif vertical:
        data = query_output.to_vertical(cells)
    else:
        data, hidden = query_output.to_table(cells, width)
    return RenderedQuery(data, len(cells.rows), len(cells.columns), hidden, time.perf_counter() - started)
