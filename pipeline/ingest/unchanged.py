"""Telling an unchanged copy without reading it: the stamp an ingest leaves, and the check of it.

A scheduled job ingests the same copy again and again, mostly unchanged. An ingest of an unchanged
copy writes nothing but its run row (pipeline/ingest/store.py: no escrow moved, the ledger markers are the
stored ones, no payload is new), but to find that out the full path loads its readers (pyarrow,
Polars) and opens the copy's snapshot: most of a second, against about a minute for the first ingest
of a 1M-diff copy (bench/BENCHMARKS.md, the no-op re-ingest).

So every ingest of a PostgreSQL copy that ends well leaves a stamp, warehouse_meta
``unchanged:<source id>``: the copy's change markers in the snapshot the ingest read
(pipeline/sources/store/postgres_markers.py), the warehouse's store state after it
(sql/warehouse/ingest/store_state.sql), the pipeline version, and what the run found that an ingest
of the same copy would report again (copy time, escrows, checkpoint disagreements).

The next ingest of that source reads the markers first. When they, the store state and the version
are the stamp's, the copy and everything an ingest decides by are as they were when that ingest
ended, and it had written all it would write: the run is recorded (``ok``, no rows, the stamp's copy
time, the markers' digest as its input digest, since the markers are what it read) and that is all.
Otherwise the full ingest runs, and stamps again. A SQLite store always takes the full path.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import TYPE_CHECKING

import duckdb

from pipeline.core.paths import sql_text
from pipeline.core.version import pipeline_version
from pipeline.ingest.runs import IngestSummary, ingest_run
from pipeline.sources.errors import SourceError
from pipeline.warehouse.database import transaction

if TYPE_CHECKING:
    from pipeline.sources.store.postgres_markers import CopyMarkers

STAMP_PREFIX = "unchanged:"  # + source id: the warehouse_meta key of a source's stamp


def ingest_unchanged(
    con: duckdb.DuckDBPyConnection, markers: CopyMarkers, label: str | None = None
) -> IngestSummary | None:
    """The run of an unchanged copy, recorded, when the stamp of its source matches; else None."""
    started = time.monotonic()
    row = con.execute("SELECT value FROM warehouse_meta WHERE key = ?", [STAMP_PREFIX + markers.source_id]).fetchall()
    if not row:
        return None
    try:
        stamp = json.loads(row[0][0])
        facts = (stamp["markers"], stamp["state"], stamp["version"])
        escrows, disagreements = int(stamp["escrows"]), int(stamp["snapshot_disagreements"])
        imported = int(stamp["snapshot_disagreements_imported"])
        copy_at = datetime.fromisoformat(stamp["copy_at"]) if stamp["copy_at"] else None
    except (ValueError, TypeError, KeyError):  # not a stamp this code wrote: the full ingest writes a new one
        return None
    if facts != (markers.digest, store_state(con), pipeline_version()):
        return None
    with ingest_run(con, source_id=markers.source_id, kind="postgres", display=markers.display, label=label) as run:
        run.copy_at, run.input_digest = copy_at, markers.digest
    return IngestSummary(
        run_id=run.run_id,
        source_id=markers.source_id,
        source_display=markers.display,
        escrows_unchanged=escrows,
        snapshot_disagreements=disagreements,
        snapshot_disagreements_imported=imported,
        elapsed_s=time.monotonic() - started,
        copy_at=copy_at,
        markers_unchanged=True,
    )


def stamp_ingest(con: duckdb.DuckDBPyConnection, store, summary: IngestSummary) -> None:
    """After an ingest of `store` that ended well: its stamp (see the module docstring). A store
    without change markers (SQLite), or whose markers cannot tell, leaves none, nor does a copy
    whose markers could not be read: its next ingest is a full one."""
    change_markers = getattr(store, "change_markers", None)
    try:
        digest = change_markers() if change_markers is not None else None
    except SourceError:
        digest = None
    key = STAMP_PREFIX + summary.source_id
    with transaction(con):
        if digest is None:
            con.execute("DELETE FROM warehouse_meta WHERE key = ?", [key])
            return
        stamp = {
            "markers": digest,
            "state": store_state(con),
            "version": pipeline_version(),
            "copy_at": summary.copy_at.isoformat() if summary.copy_at else None,
            "escrows": summary.escrows_changed + summary.escrows_unchanged,
            "snapshot_disagreements": summary.snapshot_disagreements,
            "snapshot_disagreements_imported": summary.snapshot_disagreements_imported,
        }
        con.execute("INSERT OR REPLACE INTO warehouse_meta VALUES (?, ?)", [key, json.dumps(stamp)])


def store_state(con: duckdb.DuckDBPyConnection) -> str:
    """The digest of what a store ingest decides by in the warehouse (sql/warehouse/ingest/store_state.sql)."""
    return con.execute(sql_text("warehouse/ingest/store_state.sql")).fetchall()[0][0]
