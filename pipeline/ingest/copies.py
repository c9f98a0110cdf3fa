"""Ingesting a copy by name: the one entry point of a store ingest (session store, ledger, payloads).

A PostgreSQL copy whose change markers match the stamp of its last ingest is recorded without being
read (`pipeline.ingest.unchanged`); anything else takes the full ingest (`pipeline.ingest.store`).
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from pipeline.core.events import Progress
from pipeline.ingest.runs import IngestSummary
from pipeline.ingest.unchanged import ingest_unchanged
from pipeline.sources.store import is_postgres, open_store

Warehouse = duckdb.DuckDBPyConnection | Callable[[], duckdb.DuckDBPyConnection]


def ingest_source(
    warehouse: Warehouse, spec: str, label: str | None = None, progress: Progress | None = None
) -> IngestSummary:
    """Ingest the copy that `spec` names (a postgresql:// URL, `postgres`, or a SQLite store directory):
    recorded as unchanged when its stamp says so, else through the full ingest. `warehouse` is the
    warehouse connection, or what opens it: it is opened once the source has answered, so that a
    source that cannot be read leaves no new warehouse behind."""
    connect = warehouse if callable(warehouse) else (lambda: warehouse)
    if is_postgres(spec):
        from pipeline.sources.store.postgres_markers import read_markers

        markers = read_markers(spec, connect)
        if markers is not None and (summary := ingest_unchanged(connect(), markers, label)) is not None:
            return summary
    from pipeline.ingest.store import ingest_store  # Arrow and Polars: not loaded for an unchanged copy

    store = open_store(spec)
    try:
        return ingest_store(connect(), store, label=label, progress=progress)
    finally:
        store.close()


def ingest_store_source(con: duckdb.DuckDBPyConnection, source: dict, cfg) -> IngestSummary:
    """`run`'s ingest of a `store` or `postgres` entry (pipeline/ingest/kinds.py), with progress (its summary
    is said by the run: pipeline/output/summaries.py)."""
    from pipeline.core import events

    with events.progress() as progress:
        return ingest_source(con, source.get("url") or source["path"], label=source.get("label"), progress=progress)


def other_builds_line(con: duckdb.DuckDBPyConnection, source_id: str) -> str | None:
    """One line on what older or other builds left in the copy (docs/sources.md, blob encodings and
    payload storage), all of it read; None when there is nothing of the kind."""
    from pipeline.core.paths import sql_text

    rows = con.execute(sql_text("warehouse/ingest/other_builds.sql"), {"source_id": source_id}).fetchall()
    if not rows:
        return None
    row = rows[0]
    json_checkpoints, counters, models, zst, self_verdicts = row
    parts = [
        f"{json_checkpoints:,} JSON checkpoint(s) (pre-devshard-v2)" if json_checkpoints else "",
        f"{counters:,} escrow(s) with PR #1757's validated/finished counters" if counters else "",
        f"{models:,} escrow(s) with per-model host stats" if models else "",
        f"{zst:,} answer(s) from .json.zst payload files" if zst else "",
        f"{self_verdicts:,} self-verdict(s) (validations.self_verdict)" if self_verdicts else "",
    ]
    found = [p for p in parts if p]
    return "other builds in this copy, read: " + "; ".join(found) if found else None
