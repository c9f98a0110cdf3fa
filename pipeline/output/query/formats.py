"""The output of `gonka-evidence query`: every DuckDB type in every format, exactly.

DuckDB itself turns each value into text (its own cast to VARCHAR, or JSON for nested
values), so nothing goes through a lossy conversion: decimals keep every digit, HUGEINT
and UHUGEINT stay whole, intervals keep months apart from days, time zones stay. The text
is then only framed, never reinterpreted (no Rich markup, no rounding):

- nested values (LIST, ARRAY, STRUCT, MAP, UNION) are JSON text in every text format;
- timestamps are ISO-8601 (``2026-10-23T08:00:00.5``), with a trailing ``Z`` when they
  carry a zone (the warehouse connection runs in UTC);
- NULL is ``NULL`` in table, vertical and Markdown, an empty field in CSV (an empty
  string is ``""``), ``null`` in JSON;
- NaN and infinities are ``nan``/``inf``/``-inf`` as text and the strings ``"NaN"``,
  ``"Infinity"``, ``"-Infinity"`` in JSON (which has no such numbers);
- integers and decimals are exact JSON numbers; in table, vertical and Markdown their
  digits are grouped in thousands (``1,234,567.50``), every digit kept.
"""

from __future__ import annotations

import io
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, BinaryIO

import orjson

from pipeline.core.sqlnames import quote_ident, quote_string
from pipeline.core.text import visible

if TYPE_CHECKING:
    import duckdb
    import polars as pl


class QueryFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"
    markdown = "markdown"
    parquet = "parquet"


INTEGER_TYPES = {
    "tinyint",
    "smallint",
    "integer",
    "bigint",
    "hugeint",
    "utinyint",
    "usmallint",
    "uinteger",
    "ubigint",
    "uhugeint",
    "bignum",
}
FLOAT_TYPES = {"float", "double"}
NESTED_TYPES = {"list", "array", "struct", "map", "union"}
ZONED_TIMESTAMP = "timestamp with time zone"
NAIVE_TIMESTAMPS = {"timestamp", "timestamp_s", "timestamp_ms", "timestamp_ns"}
# Types whose Arrow form is lossy (UHUGEINT above 2^127, HUGEINT past 38 digits, the offset of
# TIMETZ, BIT, BIGNUM) or that Parquet cannot hold (INTERVAL with months, UNION): Parquet gets
# their exact text instead.
PARQUET_AS_TEXT = {"hugeint", "uhugeint", "bignum", "interval", "time with time zone", "bit", "union"}
JSON_FLOATS = {"nan": '"NaN"', "inf": '"Infinity"', "-inf": '"-Infinity"'}
# A JSON string, or a bare NaN/Infinity token outside of one (DuckDB's to_json writes those).
_JSON_STRING_OR_CONSTANT = re.compile(r'"(?:[^"\\]|\\.)*"|-?Infinity|NaN')
_DIGITS = re.compile(r"(-?)(\d+)(\.\d+)?")
NULL_TEXT = "NULL"
# How long a `query` may run (its output included) unless --timeout says otherwise; 0 lifts the limit.
DEFAULT_TIMEOUT_S = 300.0
MAX_TIMEOUT_S = 10.0**7  # ~four months: past it threading.Timer overflows
# Rows the terminal table shows unless --max-rows says otherwise: its layout needs every row in memory.
TABLE_MAX_ROWS = 10_000
# On a terminal a column is first given at most this many cells; longer values fold onto
# more lines (every character kept) and wide columns get the room left over.
FOLD_WIDTH = 24
MIN_FOLDED_WIDTH = 8


# Imported by the command line for its --format choices: keep this module light (duckdb,
# pyarrow and rich are imported where they are used).


@dataclass
class Cells:
    """A query result as text: one string (or None for NULL) per cell."""

    columns: list[str]
    kinds: list[str]  # the DuckDB type id of each column, e.g. "decimal", "list"
    rows: list[tuple[str | None, ...]]

    def is_number(self, index: int) -> bool:
        return self.kinds[index] in INTEGER_TYPES or self.kinds[index] == "decimal"

    def is_right_aligned(self, index: int) -> bool:
        return self.is_number(index) or self.kinds[index] in FLOAT_TYPES


def _ident(index: int) -> str:
    # Positional references: result columns may share a name (SELECT 1 AS a, 2 AS a).
    return f"#{index + 1}"


def text_sql(index: int, kind: str, dtype: duckdb.sqltypes.DuckDBPyType | None = None) -> str:
    """The DuckDB expression that renders column ``index`` (of type ``dtype``) as exact text."""
    ref = _ident(index)
    if kind in NESTED_TYPES:
        leaves = _nested_leaves_sql(ref, dtype) if dtype is not None else None
        return f"CAST(to_json({leaves or ref}) AS VARCHAR)"
    return _scalar_text_sql(ref, kind)


def _scalar_text_sql(ref: str, kind: str) -> str:
    if kind == ZONED_TIMESTAMP:
        return rf"regexp_replace(CAST({ref} AS VARCHAR), '^(\d+-\d\d-\d\d) (\d[^+]*)\+00$', '\1T\2Z')"
    if kind == "decimal":  # DuckDB writes DECIMAL(1,1) zero as ".0": not a JSON number
        return rf"regexp_replace(CAST({ref} AS VARCHAR), '^(-?)\.', '\10.')"
    if kind in NAIVE_TIMESTAMPS:
        return rf"regexp_replace(CAST({ref} AS VARCHAR), '^(\d+-\d\d-\d\d) (\d)', '\1T\2')"
    return f"CAST({ref} AS VARCHAR)"


def _nested_leaves_sql(expr: str, dtype, depth: int = 0) -> str | None:
    """``expr`` (a nested value) with the leaves that to_json would write unlike their top-level text
    rewritten: timestamps as their ISO-8601 text, REALs as the DOUBLE of their shortest text (to_json
    widens 0.1 to 0.10000000149011612). None when no leaf needs it (UNION members are left as they are)."""
    from duckdb.sqltypes import DuckDBPyType

    kind = dtype.id
    if kind == ZONED_TIMESTAMP or kind in NAIVE_TIMESTAMPS:
        return _scalar_text_sql(expr, kind)
    if kind == "float":
        return f"CAST(CAST({expr} AS VARCHAR) AS DOUBLE)"
    if kind not in ("list", "array", "struct", "map"):
        return None
    children = [(name, child) for name, child in dtype.children if isinstance(child, DuckDBPyType)]
    var = f"__v{depth}"  # the lambda's variable, one per level
    if kind in ("list", "array"):
        inner = _nested_leaves_sql(var, children[0][1], depth + 1)
        return None if inner is None else f"list_transform({expr}, lambda {var}: {inner})"
    if kind == "map":
        key, value = (f"struct_extract({var}, '{part}')" for part in ("key", "value"))
        new_key, new_value = (
            _nested_leaves_sql(e, child, depth + 1) for e, (_, child) in zip((key, value), children, strict=True)
        )
        if new_key is None and new_value is None:
            return None
        return (
            f"map_from_entries(list_transform(map_entries({expr}), lambda {var}: "
            f"struct_pack(key := {new_key or key}, value := {new_value or value})))"
        )
    fields = [(name, f"struct_extract({expr}, {quote_string(name)})") for name, _ in children]
    rewritten = [
        _nested_leaves_sql(field, child, depth + 1) for (_, field), (_, child) in zip(fields, children, strict=True)
    ]
    if all(r is None for r in rewritten):
        return None
    packed = ", ".join(
        f"{quote_ident(name)} := {r or field}" for (name, field), r in zip(fields, rewritten, strict=True)
    )
    return f"CASE WHEN {expr} IS NULL THEN NULL ELSE struct_pack({packed}) END"


# Rows fetched from DuckDB at a time: the result streams to the output, never whole in Python.
BATCH_ROWS = 2048


def header_cells(relation: duckdb.DuckDBPyRelation) -> Cells:
    """The result's columns and their types, without rows."""
    return Cells(list(relation.columns), [t.id for t in relation.types], [])


def cell_batches(relation: duckdb.DuckDBPyRelation, limit: int | None = None) -> Iterator[list[tuple[str | None, ...]]]:
    """Run ``relation`` once and yield its rows (at most `limit`) as exact text, a batch at a time."""
    kinds: list[str] = [t.id for t in relation.types]
    projection = relation.project(
        ", ".join(text_sql(i, kind, t) for i, (kind, t) in enumerate(zip(kinds, relation.types, strict=True)))
    )
    if limit is not None:
        projection = projection.limit(limit)
    nested = [i for i, kind in enumerate(kinds) if kind in NESTED_TYPES]
    for batch in projection.to_arrow_reader(BATCH_ROWS):
        rows = list(zip(*(column.to_pylist() for column in batch.columns), strict=True))
        if nested:
            rows = [
                tuple(_json_constants_quoted(v) if i in nested and v is not None else v for i, v in enumerate(row))
                for row in rows
            ]
        yield rows


def _json_constants_quoted(text: str) -> str:
    """DuckDB's JSON with its bare NaN/Infinity (not JSON) written as strings."""
    return _JSON_STRING_OR_CONSTANT.sub(lambda m: m.group(0) if m.group(0)[0] == '"' else f'"{m.group(0)}"', text)


Batches = Iterable[list[tuple[str | None, ...]]]


def write_json(cells: Cells, batches: Batches, write: Callable[[str], None]) -> None:
    """A JSON array of row objects, one row per line."""
    keys = [orjson.dumps(name).decode() for name in cells.columns]
    encoders = [_json_encoder(kind) for kind in cells.kinds]
    first = True
    for rows in batches:
        lines = [
            "{"
            + ",".join(
                f"{key}:{'null' if value is None else encode(value)}"
                for key, encode, value in zip(keys, encoders, row, strict=True)
            )
            + "}"
            for row in rows
        ]
        if lines:
            write(("[\n" if first else ",\n") + ",\n".join(lines))
            first = False
    write("[]\n" if first else "\n]\n")


def _json_encoder(kind: str):
    if kind in INTEGER_TYPES or kind in ("decimal", "boolean") or kind in NESTED_TYPES:
        return str  # already JSON: a number, true/false, or DuckDB's JSON text
    if kind in FLOAT_TYPES:
        return lambda text: JSON_FLOATS.get(text, text)
    return lambda text: orjson.dumps(text).decode()


def write_csv(cells: Cells, batches: Batches, write: Callable[[str], None]) -> None:
    """RFC 4180 CSV with a header line; NULL is an empty field, an empty string ``""``."""
    write(",".join(_csv_field(name) for name in cells.columns) + "\n")
    for rows in batches:
        if rows:
            write("".join(",".join("" if v is None else _csv_field(v) for v in row) + "\n" for row in rows))


def _csv_field(text: str) -> str:
    if text == "" or any(c in text for c in ',"\r\n') or text != text.strip():
        return '"' + text.replace('"', '""') + '"'
    return text


def display_text(cells: Cells, index: int, value: str | None) -> str:
    """A cell as people read it: NULL spelled out, numbers with grouped digits, control characters (a
    label's ANSI sequence) as escapes that no terminal runs (`visible`; CSV, JSON and Parquet keep them)."""
    if value is None:
        return NULL_TEXT
    if cells.is_number(index):
        m = _DIGITS.fullmatch(value)
        if m:
            return f"{m.group(1)}{int(m.group(2)):,}{m.group(3) or ''}"
    return visible(value)


def display_names(cells: Cells) -> list[str]:
    """The column names as people read them (`display_text`'s escapes)."""
    return [visible(name) for name in cells.columns]


def write_markdown(cells: Cells, batches: Batches, write: Callable[[str], None]) -> None:
    """A GitHub table; ``|`` is escaped and a line break is ``<br>`` so that a cell stays a cell."""

    def line(values):
        return (
            "| "
            + " | ".join(v.replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>") for v in values)
            + " |\n"
        )

    rule = ["---:" if cells.is_right_aligned(i) else "---" for i in range(len(cells.columns))]
    started = False
    for rows in batches:
        if rows and not started:
            write(line(display_names(cells)) + "| " + " | ".join(rule) + " |\n")
            started = True
        write("".join(line(display_text(cells, i, v) for i, v in enumerate(row)) for row in rows))
    if not started:
        write("_no rows_\n")


def write_vertical(cells: Cells, batches: Batches, write: Callable[[str], None]) -> None:
    """One block per record, a ``name | value`` line per column (like psql's expanded mode)."""
    from rich.cells import cell_len

    names = display_names(cells)
    width = max((cell_len(name) for name in names), default=0)
    n = 0
    for rows in batches:
        blocks = []
        for row in rows:
            n += 1
            lines = [f"-[ RECORD {n} ]" + "-" * max(3, width - 8)]
            for i, (name, value) in enumerate(zip(names, row, strict=True)):
                first, *rest = display_text(cells, i, value).split("\n")
                pad = " " * (width - cell_len(name))
                lines.append(f"{name}{pad} | {first}")
                lines += [f"{' ' * width} | {more}" for more in rest]
            blocks.append("\n".join(lines) + "\n")
        write("".join(blocks))


@dataclass
class TableLayout:
    shown: list[int]  # column indexes, in order
    widths: list[int]  # one per shown column
    hidden: list[str]  # names of the columns that did not fit


def layout_table(cells: Cells, texts: list[list[str]], width: int | None) -> TableLayout:
    """Which columns fit in ``width`` terminal cells (None: all, at full width).

    The columns from the first one on that fit are shown, in order; the rest are left out
    (and named) so that the ones shown are readable instead of every column squeezed.
    """
    from rich.cells import cell_len

    names = display_names(cells)
    natural = []
    for i, name in enumerate(names):
        longest = max((cell_len(line) for row in texts for line in row[i].split("\n")), default=0)
        natural.append(max(cell_len(name), longest, 1))
    if width is None:
        return TableLayout(list(range(len(natural))), natural, [])
    budget = width - 1  # the left border; every column adds its width, two pads and a border
    shown: list[int] = []
    widths: list[int] = []
    for i, full in enumerate(natural):
        header = cell_len(names[i])
        want = min(full, max(header, FOLD_WIDTH))
        room = budget - 3
        # A column is shown if its header fits (and a few cells of its values): narrower than
        # it wants, it folds.
        if room < min(full, max(header, MIN_FOLDED_WIDTH)) and shown:
            break
        shown.append(i)
        widths.append(max(min(want, room), 1))
        budget -= widths[-1] + 3
    for k, i in enumerate(shown):  # the room left goes to folded columns, left to right
        extra = min(max(budget, 0), natural[i] - widths[k])
        widths[k] += extra
        budget -= extra
    hidden = [name for i, name in enumerate(names) if i not in shown]
    return TableLayout(shown, widths, hidden)


def to_table(cells: Cells, width: int | None) -> tuple[str, list[str]]:
    """The table as text, and the names of the columns left out to fit ``width``."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    texts = [[display_text(cells, i, v) for i, v in enumerate(row)] for row in cells.rows]
    layout = layout_table(cells, texts, width)
    names = display_names(cells)
    table = Table()
    for i, w in zip(layout.shown, layout.widths, strict=True):
        table.add_column(
            Text(names[i]),
            justify="right" if cells.is_right_aligned(i) else "left",
            width=w,
            overflow="fold",
            no_wrap=False,
        )
    for row in texts:
        table.add_row(*(Text(row[i]) for i in layout.shown))  # Text: a value is never Rich markup
    total = sum(layout.widths) + 3 * len(layout.widths) + 1
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=total,
        color_system=None,
        force_terminal=False,
        highlight=False,
        emoji=False,
        markup=False,
        soft_wrap=False,
    )
    console.print(table)
    text = "\n".join(line.rstrip() for line in buffer.getvalue().splitlines())
    return text, layout.hidden


def terminal_width() -> int | None:
    """The width to fit the table to: the terminal's (or $COLUMNS); None when piped."""
    import os

    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return shutil.get_terminal_size().columns
    return None


def write_parquet(relation: duckdb.DuckDBPyRelation, sink: BinaryIO, limit: int | None = None) -> int:
    """Parquet of the result (at most `limit` rows) written to `sink` a batch at a time; returns its rows.
    Columns whose Arrow form would lose digits, months or zones (see ``PARQUET_AS_TEXT``; also nested
    values holding one) are written as their exact text; HUGEINT/UHUGEINT as DECIMAL(38,0) unless a
    value has 39 digits (which takes one more pass over the result)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    kinds, as_text, projection = _exact_projection(relation)
    if limit is not None:
        projection = projection.limit(limit)
    # pyarrow's cast wraps a 39-digit value around silently, and DECIMAL(39) is not read back
    # faithfully (DuckDB reads -1): such a column stays text.
    decimal = {
        i
        for i, kind in enumerate(kinds)
        if kind in ("hugeint", "uhugeint") and (_longest_digits(projection, i) or 0) <= 38
    }
    reader = projection.to_arrow_reader(BATCH_ROWS)
    writer = None
    rows = 0
    try:
        for batch in _with_one_batch(reader, pa):
            columns = []
            for i, column in enumerate(batch.columns):
                if i in decimal:
                    column = column.cast(pa.decimal128(38, 0))
                elif kinds[i] in NESTED_TYPES and as_text[i]:
                    column = pa.array(
                        [None if v is None else _json_constants_quoted(v) for v in column.to_pylist()], pa.string()
                    )
                columns.append(column)
            table = pa.Table.from_arrays(columns, names=list(relation.columns))
            if writer is None:
                writer = pq.ParquetWriter(sink, table.schema)
            writer.write_table(table)
            rows += table.num_rows
    finally:
        if writer is not None:
            writer.close()
    return rows


def _with_one_batch(reader, pa):
    """The reader's batches; an empty result still gives one (empty) batch, so the file has its schema."""
    empty = True
    for batch in reader:
        empty = False
        yield batch
    if empty:
        yield pa.RecordBatch.from_pylist([], schema=reader.schema)


def _longest_digits(projection: duckdb.DuckDBPyRelation, index: int) -> int | None:
    return projection.aggregate(f"max(length(ltrim(c{index}, '-')))").fetchall()[0][0]


def _exact_projection(relation: duckdb.DuckDBPyRelation):
    """The result as columns c0, c1, …, those whose Arrow form would lose digits, months or zones
    (``_parquet_as_text``) as their exact text; with each column's DuckDB type id and whether it is text."""
    kinds: list[str] = [t.id for t in relation.types]
    as_text = [_parquet_as_text(t) for t in relation.types]
    exprs = [
        text_sql(i, kind, t) if bad else _ident(i)
        for i, (kind, t, bad) in enumerate(zip(kinds, relation.types, as_text, strict=True))
    ]
    return kinds, as_text, relation.project(", ".join(f"{e} AS c{i}" for i, e in enumerate(exprs)))


def to_frame(relation: duckdb.DuckDBPyRelation) -> pl.DataFrame:
    """The result as a Polars frame holding every value exactly (the Python API's `query`).

    Arrow hands HUGEINT and UHUGEINT over as DECIMAL(38,0), which wraps a 39-digit value
    around; they become Int128 and UInt128 here. Polars cannot take INTERVAL (months) or
    UNION at all and would drop the offset of TIMETZ and read BIT and BIGNUM as bytes: those
    columns (and nested values holding one, or a HUGEINT) are their exact text, as ``query``
    prints them (see ``PARQUET_AS_TEXT``)."""
    import polars as pl

    kinds, as_text, projection = _exact_projection(relation)
    table = projection.to_arrow_table()
    aliases = table.column_names  # c0, c1, …: result columns may share a name; Polars' may not
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)  # an Arrow table gives a frame (a Series only from an array)
    casts = []
    for alias, kind, bad in zip(aliases, kinds, as_text, strict=True):
        if kind in ("hugeint", "uhugeint"):
            casts.append(pl.col(alias).cast(pl.Int128 if kind == "hugeint" else pl.UInt128))
        elif kind in NESTED_TYPES and bad:
            casts.append(pl.col(alias).map_elements(_json_constants_quoted, return_dtype=pl.String))
    if casts:
        frame = frame.with_columns(casts)
    names = list(relation.columns)
    if len(set(names)) < len(names):
        raise ValueError(
            f"columns share a name ({', '.join(sorted({n for n in names if names.count(n) > 1}))}): "
            "a Polars frame needs unique names (give them aliases)"
        )
    return frame.rename(dict(zip(aliases, names, strict=True)))


def _parquet_as_text(dtype) -> bool:
    from duckdb.sqltypes import DuckDBPyType

    if dtype.id in PARQUET_AS_TEXT:
        return True
    if dtype.id in NESTED_TYPES:
        return any(_parquet_as_text(child) for _, child in dtype.children if isinstance(child, DuckDBPyType))
    return False
