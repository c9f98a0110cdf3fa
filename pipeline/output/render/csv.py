"""CSV of the rows only: one header line, one line per row."""

from __future__ import annotations

import polars as pl

from pipeline.evidence.result import EvidenceResult

ISO_UTC_FORMAT = "%Y-%m-%dT%H:%M:%S%.fZ"


# A text cell a spreadsheet would run as a formula: one that starts with =, +, @, a tab or a carriage
# return, or with - unless it is a plain number (OWASP "CSV injection"). It gets a leading ' (shown by no
# spreadsheet, and a reader of the file sees why).
_FORMULA_START = r"^[=+@\t\r-]"
_PLAIN_NUMBER = r"^-\d+(\.\d+)?([eE][-+]?\d+)?$"


def render_csv(result: EvidenceResult) -> str:
    """The rows as CSV (`frame_csv`)."""
    return frame_csv(result.rows)


def frame_csv(rows: pl.DataFrame) -> str:
    """`rows` as CSV (polars ``write_csv``): lists joined with ``;``, structs as JSON, datetimes as
    ISO-8601 UTC ending in ``Z``, null as an empty field; a text cell that a spreadsheet would run as a
    formula (a label from outside: ``=HYPERLINK(…)``) starts with ``'``."""
    columns = [_csv_column(name, dtype) for name, dtype in rows.schema.items()]
    return rows.select(columns).write_csv().rstrip("\n")


def _defused(column: pl.Expr) -> pl.Expr:
    formula = column.str.contains(_FORMULA_START) & ~column.str.contains(_PLAIN_NUMBER)
    return pl.when(formula).then(pl.lit("'") + column).otherwise(column)


def _csv_column(name: str, dtype: pl.DataType) -> pl.Expr:
    column = pl.col(name)
    if isinstance(dtype, (pl.List, pl.Array)):
        if isinstance(dtype, pl.Array):
            column = column.arr.to_list()
        return _defused(column.list.eval(pl.element().cast(pl.String)).list.join(";")).alias(name)
    if isinstance(dtype, pl.Struct):
        return column.struct.json_encode()
    if isinstance(dtype, pl.Datetime):
        if dtype.time_zone is not None:
            column = column.dt.convert_time_zone("UTC")
        return column.dt.to_string(ISO_UTC_FORMAT)
    if dtype == pl.String or dtype == pl.Categorical:
        return _defused(column.cast(pl.String)).alias(name)
    return column
