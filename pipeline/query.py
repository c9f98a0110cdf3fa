"""Ad-hoc and named queries on the warehouse views (read-only)."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path

import duckdb
import orjson
import polars as pl

from pipeline.warehouse import fetch_frame
from pipeline.paths import SQL_DIR

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


def run_query(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, str]) -> pl.DataFrame:
    used = set(re.findall(r"\$([A-Za-z_]\w*)", sql))
    missing = used - set(params)
    if missing:
        raise QueryError(f"missing --param for: {', '.join(sorted(missing))}")
    try:
        return fetch_frame(con, sql, {k: v for k, v in params.items() if k in used} or None)
    except duckdb.Error as exc:
        raise QueryError(str(exc).splitlines()[0]) from None


def json_default(value):
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError


def with_iso_times(frame: pl.DataFrame) -> pl.DataFrame:
    """Datetime columns as ISO-8601 strings: UTC with a trailing Z for zoned ones."""
    def iso(col: str, dtype) -> pl.Expr:
        e = pl.col(col)
        if dtype.time_zone:
            e = e.dt.convert_time_zone("UTC")
        text = e.dt.strftime("%Y-%m-%dT%H:%M:%S%.f").str.replace(r"\.0+$", "").str.replace(r"(\.\d*?)0+$", "$1")
        return (text + "Z") if dtype.time_zone else text

    return frame.with_columns(iso(c, t).alias(c) for c, t in frame.schema.items() if isinstance(t, pl.Datetime))


def frame_to_json(frame: pl.DataFrame) -> str:
    """JSON array of row objects; timestamps as ISO-8601 UTC with a trailing Z."""
    return orjson.dumps(with_iso_times(frame).to_dicts(), default=json_default).decode()


def frame_to_csv(frame: pl.DataFrame) -> str:
    return with_iso_times(frame).write_csv()


def frame_to_bytes(frame: pl.DataFrame, fmt: str) -> bytes:
    if fmt == "parquet":
        buf = io.BytesIO()
        frame.write_parquet(buf)
        return buf.getvalue()
    raise QueryError(f"unknown binary format {fmt}")
