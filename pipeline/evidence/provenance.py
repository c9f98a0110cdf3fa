"""The provenance footer of an evidence table: which copies, which runs, which window, which command."""

from __future__ import annotations

import duckdb

import pipeline
from pipeline.evidence.result import Provenance
from pipeline.evidence.window import Window
from pipeline.paths import sql_text
from pipeline.warehouse import fetch_frame


def provenance(con: duckdb.DuckDBPyConnection, window: Window, command: str) -> Provenance:
    """Provenance of a table computed now from the warehouse behind `con`.

    Sources are those with at least one successful ingest run (``status = 'ok'``);
    each carries the kind, label and copy time of its latest successful run.
    ``run_ids`` are all successful runs, per source in run order. Quarantined rows
    are counted over the whole warehouse: a row that could not be decoded may
    belong to any table.
    """
    sources = fetch_frame(con, sql_text("evidence/sources.sql"))
    quarantined = fetch_frame(con, "SELECT count(*) AS n FROM quarantine")["n"][0]
    return Provenance(
        sources=sources.select("source_id", "source_kind", "label", "copy_at").to_dicts(),
        run_ids=[run for runs in sources["run_ids"].to_list() for run in runs],
        window=window.as_dict(),
        quarantined_rows=int(quarantined),
        command=command,
        pipeline_version=pipeline.__version__,
    )
