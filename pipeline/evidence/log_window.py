"""Time bounds of an evidence window for tables built from logs (which carry times, not epochs)."""

from __future__ import annotations

import datetime as dt

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.window import EvidenceError, Window
from pipeline.warehouse.database import fetch_frame


def time_bounds(con: duckdb.DuckDBPyConnection, window: Window) -> tuple[dt.datetime | None, dt.datetime | None]:
    """``[since, until)`` of the window; ``--epoch N`` = the span of epoch N's inferences."""
    if window.epoch is None:
        return window.since, window.until
    bounds = fetch_frame(con, sql_text("evidence/log_window_bounds.sql"), {"epoch": window.epoch})
    since, until = bounds["since"][0], bounds["until"][0]
    if since is None:
        raise EvidenceError(f"epoch {window.epoch} has no inferences in the warehouse, so its time span is unknown")
    return since, until


def build_order(con: duckdb.DuckDBPyConnection, host: str, present: list[str]) -> list[str]:
    """The host's builds in the order they started, then any other label present, 'unattributed' last."""
    builds = fetch_frame(con, sql_text("evidence/host_builds.sql"), {"host": host})["build"].to_list()
    extra = sorted(b for b in set(present) if b not in builds and b != "unattributed")
    return builds + extra + (["unattributed"] if "unattributed" in present else [])


def in_build_order(con: duckdb.DuckDBPyConnection, host: str, rows: pl.DataFrame) -> pl.DataFrame:
    """`rows` (one per `build`) sorted by `build_order`."""
    order = build_order(con, host, rows["build"].to_list())
    rank = pl.col("build").replace_strict(order, list(range(len(order))), default=len(order))
    return rows.sort(rank)
