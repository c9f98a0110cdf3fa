"""Unix timestamps as the devshard writers store them: seconds or milliseconds, 0 meaning unset.

Timestamps are UTC everywhere (docs/data-model.md, time): the unit is detected by magnitude here, never
guessed per call site.
"""

from __future__ import annotations

import polars as pl

# 1e11 seconds is the year 5138; 1e11 milliseconds is 1973. Real values sit far from the cut.
MILLISECONDS_FROM = 100_000_000_000


def unix_seconds(value: int | None) -> int | None:
    """Whole seconds of a unix timestamp stored in seconds or milliseconds; None for unset (0 or NULL)."""
    if not value:
        return None
    return value // 1000 if value >= MILLISECONDS_FROM else value


def unix_seconds_expr(col: str | pl.Expr) -> pl.Expr:
    """Polars version of `unix_seconds`: NULL for 0/NULL, milliseconds scaled down."""
    e = pl.col(col) if isinstance(col, str) else col
    return pl.when(e.is_null() | (e == 0)).then(None).when(e >= MILLISECONDS_FROM).then(e // 1000).otherwise(e)


def to_utc_datetime_expr(seconds: pl.Expr) -> pl.Expr:
    return pl.from_epoch(seconds, time_unit="s").dt.replace_time_zone("UTC")
