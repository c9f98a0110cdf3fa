"""Ad-hoc and named queries on the warehouse views (read-only)."""

from __future__ import annotations

import io
import os
import re
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import duckdb
import polars as pl

from pipeline.core.errors import UserError
from pipeline.core.interrupts import on_interrupt
from pipeline.core.paths import SQL_DIR
from pipeline.output.guards.safety import OutputGuard, output_file
from pipeline.output.query import formats as query_output
from pipeline.output.query.formats import DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S, TABLE_MAX_ROWS, QueryFormat
from pipeline.warehouse.database import out_of_memory
from pipeline.warehouse.database import relation as warehouse_relation

QUERIES_DIR = SQL_DIR / "queries"
MAX_SQL_BYTES = 16 * 2**20  # a --file longer than this is not SQL someone wrote

HEADER = re.compile(r"^--\s*(name|description|params):\s*(.*)$")


class QueryError(UserError):
    """A query the user wrote or named that cannot run; one-line message."""


@dataclass
class NamedQuery:
    name: str
    description: str
    params: str
    sql: str


# What an output file's extension says it holds; any other extension says nothing.
FORMAT_OF_EXTENSION = {
    ".csv": QueryFormat.csv,
    ".json": QueryFormat.json,
    ".md": QueryFormat.markdown,
    ".markdown": QueryFormat.markdown,
    ".parquet": QueryFormat.parquet,
}


def output_format(fmt: QueryFormat | None, output: Path | None) -> QueryFormat:
    """The format to write: ``fmt`` when given, else the one ``output``'s extension names, else the table.
    A given ``fmt`` that contradicts the extension is refused (a .csv file of JSON misleads its reader)."""
    name = Path(output).name if output is not None else ""
    implied = FORMAT_OF_EXTENSION.get(Path(name).suffix.lower())
    if fmt is None:
        return implied or QueryFormat.table
    if implied is not None and implied is not fmt:
        raise QueryError(
            f"--format {fmt.value} contradicts {name}'s extension ({implied.value}): "
            f"leave out --format, or name the file for {fmt.value}"
        )
    return fmt


def named_queries() -> dict[str, NamedQuery]:
    found = {}
    for path in sorted(QUERIES_DIR.glob("*.sql")):
        text = path.read_text(encoding="utf-8")
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
        return read_sql_file(Path(file))
    if text is None:
        raise QueryError("give SQL, a query name (see `gonka-evidence query --list`) or --file")
    queries = named_queries()
    if text in queries:
        return queries[text].sql
    if re.fullmatch(r"[A-Za-z_][\w-]*", text):
        raise QueryError(f"no named query {text!r} (see `gonka-evidence query --list`)")
    return text


def read_sql_file(file: Path) -> str:
    """The SQL text of a regular file of at most MAX_SQL_BYTES (a pipe or a device could never end)."""
    try:
        with open(file, "rb", opener=_nonblocking) as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise QueryError(f"{file}: not a regular file (give --file a file of SQL)")
            data = f.read(MAX_SQL_BYTES + 1)
    except FileNotFoundError:
        raise QueryError(f"{file}: no such file") from None
    except OSError as exc:
        raise QueryError(f"{file}: cannot read ({exc.strerror or exc})") from None
    if len(data) > MAX_SQL_BYTES:
        raise QueryError(f"{file}: longer than {MAX_SQL_BYTES // 2**20} MiB, not a file of SQL")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise QueryError(f"{file}: not UTF-8 text (byte {exc.start})") from None


def _nonblocking(path: str, flags: int) -> int:
    """Open without waiting for a writer (a named pipe would block the open itself)."""
    return os.open(path, flags | os.O_NONBLOCK)


def parse_params(items: list[str]) -> dict[str, str]:
    """``--param k=v`` items as a dict; each k a name the SQL can use as $k."""
    params = {}
    for item in items:
        if "=" not in item:
            raise QueryError(f"--param {item!r} is not k=v")
        k, v = item.split("=", 1)
        if not k.isidentifier():
            raise QueryError(f"--param {item!r}: {k!r} is not a parameter name (letters, digits and _, as in $name)")
        params[k] = v
    return params


INTERRUPT_EVERY_S = 0.05
# Statements that only read: anything else is refused before it runs, by its kind (the read-only connection
# would refuse it too, but with a message about views and base tables).
READING_STATEMENTS = {"SELECT", "EXPLAIN", "PRAGMA", "CALL"}
_UNKNOWN_RELATION = re.compile(r"Table with name (\S+) does not exist")


def _bound(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, str]) -> dict[str, str] | None:
    """The parameters ``sql`` uses ($name, as DuckDB parses it: not inside strings), checked to be all given;
    a statement that is not a query is refused."""
    statements = con.extract_statements(sql)
    for statement in statements:
        if statement.type.name not in READING_STATEMENTS:
            raise QueryError(
                f"the warehouse is read-only here: SELECT only (this is a {statement.type.name} statement)"
            )
    used = {name for statement in statements for name in statement.named_parameters}
    # A parameter the SQL does not use is refused, never dropped: a typo in its name (or a query without
    # it, `epoch_summary --param epoch=99`) would otherwise print an answer to another question.
    if unused := sorted(set(params) - used):
        takes = ", ".join(f"${name}" for name in sorted(used)) if used else None
        raise QueryError(
            f"--param {unused[0]}: the query uses no ${unused[0]} "
            + (f"(it takes {takes})" if takes else "(it takes no parameter)")
        )
    missing = used - set(params)
    if missing:
        raise QueryError(f"missing --param for: {', '.join(sorted(missing))}")
    return {k: _held(con, k, v) for k, v in params.items() if k in used} or None


# Parameters that name a host, epoch, build or escrow: checked against the warehouse like the options are.
VALUE_PARAMS = {
    "host": "host",
    "executor": "host",
    "validator": "host",
    "address": "host",
    "epoch": "epoch",
    "epoch_id": "epoch",
    "compare": "epoch",
    "build": "build",
    "escrow": "escrow",
    "escrow_id": "escrow",
}


def _held(con: duckdb.DuckDBPyConnection, name: str, value):
    """`value` of parameter `name`, checked when it names a host, epoch, build or escrow (a typo must not
    print an empty table as if the warehouse held nothing for it); others as given."""
    from pipeline.warehouse.held import UnheldValue, check_value

    kind = VALUE_PARAMS.get(name)
    if kind is None or value is None:
        return value
    try:
        checked = check_value(con, kind, value, f"--param {name}=")  # type: ignore[arg-type]
    except UnheldValue as exc:
        raise QueryError(str(exc).replace(f"--param {name}= ", f"--param {name}=")) from None
    return checked if isinstance(value, str) else value


def _error(con: duckdb.DuckDBPyConnection, exc: duckdb.Error) -> QueryError:
    """DuckDB's error as one line; an unknown table or view named with the warehouse's closest views."""
    text = str(exc).splitlines()[0]
    if isinstance(exc, duckdb.CatalogException) and (m := _UNKNOWN_RELATION.search(text)):
        import difflib

        views = [v for (v,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]
        close = difflib.get_close_matches(m.group(1).lower(), views, n=3, cutoff=0.5)
        hint = f"closest views: {', '.join(close)}; " if close else ""
        return QueryError(
            f"no table or view {m.group(1)} in the warehouse ({hint}the views are in docs/schema.md, "
            "the named queries in `gonka-evidence query --list`)"
        )
    return QueryError(text)


def run_query(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, str]) -> pl.DataFrame:
    """The result of ``sql`` as a Polars frame, every value exact (see `query_output.to_frame`)."""
    try:
        relation = warehouse_relation(con, sql, _bound(con, sql, params))
        if relation is None:
            raise QueryError("the statement returned no result to show (only queries do)")
        return query_output.to_frame(relation)
    except duckdb.OutOfMemoryException:
        raise out_of_memory("the query") from None
    except duckdb.Error as exc:
        raise _error(con, exc) from None
    except ValueError as exc:
        raise QueryError(str(exc).splitlines()[0]) from None


@dataclass
class RenderedQuery:
    data: str | bytes  # text without a final newline, or Parquet bytes
    rows: int
    columns: int
    hidden: list[str]  # columns the table left out to fit the terminal
    elapsed_s: float
    truncated: bool = False  # more rows than max_rows: only the first ones are in `data`


class TimeLimit:
    """Interrupts what runs on `con` once `seconds` have passed (None or 0: never) or a Ctrl-C came
    (`ctrl_c`), and again every INTERRUPT_EVERY_S until cancelled: an interrupt lands only while a statement
    runs, so one that fired before the query started, or between two fetches of its rows, would otherwise
    be lost."""

    def __init__(self, con: duckdb.DuckDBPyConnection, seconds: float | None):
        self.seconds, self.fired, self.ctrl_c = seconds, threading.Event(), threading.Event()
        self._done, self._wake = threading.Event(), threading.Event()
        threading.Thread(target=self._watch, args=[con], daemon=True).start()

    def _watch(self, con: duckdb.DuckDBPyConnection) -> None:
        if not self._wake.wait(self.seconds or None):
            self.fired.set()  # the time limit, not a Ctrl-C
        while not self._done.is_set():
            con.interrupt()
            if self._done.wait(INTERRUPT_EVERY_S):
                return

    def interrupt(self) -> None:
        """A Ctrl-C (from the signal handler): stop the query now."""
        self.ctrl_c.set()
        self._wake.set()

    def cancel(self) -> None:
        self._done.set()
        self._wake.set()

    def error(self) -> QueryError:
        return QueryError(
            f"the query ran longer than its limit of {self.seconds:g} s and was stopped (--timeout SECONDS, 0 for none)"
        )


def stream_query(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    params: dict[str, str],
    fmt: QueryFormat,
    sink: BinaryIO,
    *,
    vertical: bool = False,
    width: int | None = None,
    max_rows: int | None = None,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
) -> RenderedQuery:
    """Run ``sql`` once and write its result exactly in ``fmt`` to `sink` as DuckDB hands it over, a batch
    at a time (see pipeline.output.query.formats); only the terminal table holds its rows. At most
    `max_rows` rows (0: all; None: TABLE_MAX_ROWS for the table, else all). ``width``: fit the table to
    this many terminal cells (None: every column, full width). The returned RenderedQuery has no data."""
    if max_rows is None:
        max_rows = TABLE_MAX_ROWS if fmt is QueryFormat.table and not vertical else 0
    if max_rows < 0:
        raise QueryError(f"--max-rows {max_rows} is negative (0 shows every row)")
    if timeout_s is not None and not 0 <= timeout_s < MAX_TIMEOUT_S:
        raise QueryError(f"--timeout {timeout_s:g} is not a number of seconds from 0 (no limit) to {MAX_TIMEOUT_S:g}")
    max_rows = max_rows or None
    limit = TimeLimit(con, timeout_s)
    try:
        with on_interrupt(limit.interrupt):
            rendered = _stream(con, sql, params, fmt, sink, vertical, width, max_rows)
        if limit.ctrl_c.is_set():  # the Ctrl-C came as the last rows went out: still a Ctrl-C
            raise KeyboardInterrupt
        return rendered
    except duckdb.InterruptException:
        if limit.ctrl_c.is_set():
            raise KeyboardInterrupt from None
        if not limit.fired.is_set():  # not the limit: a Ctrl-C, which the command line reports as such
            raise
    except OSError as exc:  # an interrupt while Arrow fetches the rows: an OSError without errno (a write has one)
        if exc.errno is None and limit.ctrl_c.is_set():
            raise KeyboardInterrupt from None
        if exc.errno is not None or not limit.fired.is_set():
            raise
    finally:
        limit.cancel()
    # Raised here, outside the handler: an error whose context is an interruption reads as a Ctrl-C.
    raise limit.error()


def write_query(
    con: duckdb.DuckDBPyConnection,
    warehouse: Path,
    sql: str,
    params: dict[str, str],
    fmt: QueryFormat,
    *,
    output: Path | None = None,
    sink: BinaryIO | None = None,
    vertical: bool = False,
    width: int | None = None,
    max_rows: int | None = None,
    timeout_s: float | None = None,
) -> RenderedQuery:
    """The `query` task: `stream_query` to the file `output` (whole or not at all; never the warehouse at
    `warehouse`, a source or inside one) or to `sink`; `timeout_s` None is DEFAULT_TIMEOUT_S, 0 none."""
    limit = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    if output is None:
        if sink is None:
            raise ValueError("write_query needs an output file or a sink")
        return stream_query(
            con, sql, params, fmt, sink, vertical=vertical, width=width, max_rows=max_rows, timeout_s=limit
        )
    OutputGuard.of(con, warehouse).check(output, "--output")
    with output_file(output) as file:
        return stream_query(
            con, sql, params, fmt, file, vertical=vertical, width=width, max_rows=max_rows, timeout_s=limit
        )


def _stream(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    params: dict[str, str],
    fmt: QueryFormat,
    sink: BinaryIO,
    vertical: bool,
    width: int | None,
    max_rows: int | None,
) -> RenderedQuery:
    started = time.perf_counter()
    counted = _Counter(max_rows)
    hidden: list[str] = []

    def write(text: str) -> None:
        sink.write(text.encode())

    try:
        relation = warehouse_relation(con, sql, _bound(con, sql, params))
        if relation is None:
            raise QueryError("the statement returned no result to show (only queries do)")
        limit = None if max_rows is None else max_rows + 1  # one more tells that rows were left out
        if fmt is QueryFormat.parquet:
            counted.rows = query_output.write_parquet(relation, sink, max_rows)
            counted.more = max_rows is not None and counted.rows == max_rows and _has_row(relation, max_rows)
        else:
            cells = query_output.header_cells(relation)
            batches = counted.count(query_output.cell_batches(relation, limit))
            if fmt is QueryFormat.csv:
                query_output.write_csv(cells, batches, write)
            elif fmt is QueryFormat.json:
                query_output.write_json(cells, batches, write)
            elif fmt is QueryFormat.markdown:
                query_output.write_markdown(cells, batches, write)
            elif vertical:
                query_output.write_vertical(cells, batches, write)
            else:
                cells.rows = [row for rows in batches for row in rows]
                text, hidden = query_output.to_table(cells, width)
                write(text + "\n")
    except duckdb.InterruptException:
        raise
    except duckdb.OutOfMemoryException:
        raise out_of_memory("the query") from None
    except duckdb.Error as exc:
        raise _error(con, exc) from None
    return RenderedQuery(
        "", counted.rows, len(relation.columns), hidden, time.perf_counter() - started, truncated=counted.more
    )


class _Counter:
    """Counts the rows that pass, stops at `limit` and notes whether more were there."""

    def __init__(self, limit: int | None):
        self.limit, self.rows, self.more = limit, 0, False

    def count(self, batches: Iterator[list]) -> Iterator[list]:
        for rows in batches:
            if self.limit is not None and self.rows + len(rows) > self.limit:
                rows = rows[: self.limit - self.rows]
                self.more = True
            self.rows += len(rows)
            yield rows
            if self.more:
                return


def _has_row(relation: duckdb.DuckDBPyRelation, offset: int) -> bool:
    return bool(relation.limit(1, offset=offset).fetchall())


def render_query(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    params: dict[str, str],
    fmt: QueryFormat,
    vertical: bool = False,
    width: int | None = None,
    max_rows: int | None = None,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
) -> RenderedQuery:
    """`stream_query` into memory: the result as text without its final newline, or Parquet bytes."""
    buffer = io.BytesIO()
    rendered = stream_query(
        con, sql, params, fmt, buffer, vertical=vertical, width=width, max_rows=max_rows, timeout_s=timeout_s
    )
    data = buffer.getvalue()
    rendered.data = data if fmt is QueryFormat.parquet else data.decode().removesuffix("\n")
    return rendered
