"""CSV of the rows only: one header line, one line per row."""

from __future__ import annotations

import polars as pl

from pipeline.evidence.result import EvidenceResult

ISO_UTC_FORMAT = "%Y-%m-%dT%H:%M:%S%.fZ"


def render_csv(result: EvidenceResult) -> str:
    """The rows as CSV (polars ``write_csv``): lists joined with ``;``, structs as
    JSON, datetimes as ISO-8601 UTC ending in ``Z``, null as an empty field."""
    columns = [_csv_column(name, dtype) for name, dtype in result.rows.schema.items()]
    return result.rows.select(columns).write_csv().rstrip("\n")


def _csv_column(name: str, dtype: pl.DataType) -> pl.Expr:
    column = pl.col(name)
    if isinstance(dtype, (pl.List, pl.Array)):
        if isinstance(dtype, pl.Array):
            column = column.arr.to_list()
        return column.list.eval(pl.element().cast(pl.String)).list.join(";")
    if isinstance(dtype, pl.Struct):
        return column.struct.json_encode()
    if isinstance(dtype, pl.Datetime):
        if dtype.time_zone is not None:
            column = column.dt.convert_time_zone("UTC")
        return column.dt.to_string(ISO_UTC_FORMAT)
    return column
