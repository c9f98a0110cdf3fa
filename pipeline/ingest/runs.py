"""Writing into the warehouse: the one home of ingest-run bookkeeping, quarantine and inserts.

Sources and transforms only produce data (Polars frames, Arrow tables or dict rows) with their
natural keys; every ingest path writes through an `IngestRun`:

    with ingest_run(con, source_id="logs:gonka1…", kind="logs", display="vllm.log") as run:
        with transaction(con):
            run.insert("log_engine_events", frame, on_conflict="ignore")
            run.quarantine([("vllm_log", key, "unparsed line 12 of vllm.log: …")])
        run.copy_at = newest_event

`ingest_run` records the run in ``ingest_runs`` (status ``running``) in its own transaction
first, so a killed ingest leaves a visible trace (which the next writer marks ``aborted``), and
marks it ``ok`` or ``failed`` at the end with the rows written per table and the copy time.
Inserts and quarantine rows join the caller's transaction: data and its bookkeeping commit
together (an ingest is atomic and idempotent).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Union

import duckdb

from pipeline.core.version import pipeline_version
from pipeline.ingest.accounting import Accounting, AccountingRow
from pipeline.warehouse.database import first_row, live_run, transaction

# Polars and pyarrow are imported where rows are written: recording a run (an ingest of an
# unchanged copy writes nothing else) needs neither.
if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

Problem = tuple[str, str, str]  # (source table, row key, reason)
OnConflict = Literal["error", "ignore", "replace"]
Rows = Union["pl.DataFrame", "pa.Table", list[dict]]
QUARANTINE_COLUMNS = ("run_id", "source_id", "table_name", "row_key", "reason")  # all strings


def scalar(result: duckdb.DuckDBPyConnection) -> Any:
    """The first column of the one row a statement returned (a count, the rows an INSERT wrote)."""
    return first_row(result)[0]


def derived_run_id(
    con: duckdb.DuckDBPyConnection, source_id: str, kind: str, digest: str | None = None, sample: str | None = None
) -> str:
    """The id of the next ingest run: a hash of its position in the warehouse's run history, the
    source and what the run is known to read before it starts (the input digest, when there is one;
    else `sample`, a digest of parts of the inputs: two different inputs never share a run id).

    The same copies ingested in the same order into two fresh warehouses get the same run ids, so
    footers that name runs are reproducible byte for byte; the position keeps ids unique when the
    same copy is ingested twice."""
    position = scalar(con.execute("SELECT count(*) FROM ingest_runs"))
    # (a run without a sample keeps the id it had before samples entered the material)
    material = "\x00".join((str(position), source_id, kind, digest or "", *([sample] if sample else [])))
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def _arrow(rows: Rows) -> pa.Table | None:
    """The rows as Arrow, or None when there are none."""
    import polars as pl

    if isinstance(rows, list):
        if not rows:
            return None
        rows = pl.DataFrame(rows, infer_schema_length=None)
    table = rows.to_arrow() if isinstance(rows, pl.DataFrame) else rows
    return table if table.num_rows else None


def insert(con: duckdb.DuckDBPyConnection, table: str, rows: Rows, on_conflict: OnConflict = "error") -> int:
    """Insert rows by column name (inside the caller's transaction); returns the rows written.

    ``on_conflict``: ``error`` for plain appends, ``ignore`` keeps what the warehouse has under the
    same key, ``replace`` overwrites it (the newest copy wins)."""
    data = _arrow(rows)
    if data is None:
        return 0
    verb = {"error": "INSERT", "ignore": "INSERT OR IGNORE", "replace": "INSERT OR REPLACE"}[on_conflict]
    con.register("rows_to_insert", data)
    try:
        return int(scalar(con.execute(f"{verb} INTO {table} BY NAME (SELECT * FROM rows_to_insert)")))
    finally:
        con.unregister("rows_to_insert")


def quarantine(
    con: duckdb.DuckDBPyConnection, run_id: str, source_id: str, problems: Iterable[Problem] | pl.DataFrame
) -> int:
    """Record problem rows (the first report of a row wins: re-reading it adds nothing).

    ``problems`` are (table, key, reason) tuples, or a frame with columns table_name, row_key,
    reason (and optionally source_id, for sources that identify each file on its own)."""
    import polars as pl

    if isinstance(problems, pl.DataFrame):
        frame = problems
    else:
        frame = pl.DataFrame(list(problems), schema=["table_name", "row_key", "reason"], orient="row")
    if frame.height == 0:
        return 0
    if "source_id" not in frame.columns:
        frame = frame.with_columns(source_id=pl.lit(source_id))
    frame = (
        frame.with_columns(run_id=pl.lit(run_id))
        .select([pl.col(c).cast(pl.String) for c in QUARANTINE_COLUMNS])
        .unique(subset=["source_id", "table_name", "row_key"], keep="first", maintain_order=True)
    )
    insert(con, "quarantine", frame, on_conflict="ignore")
    return frame.height


@dataclass
class IngestRun:
    """One ingest run: its id, what it wrote and what it could not read."""

    con: duckdb.DuckDBPyConnection
    run_id: str
    source_id: str
    rows: dict[str, int] = field(default_factory=dict)
    quarantined: int = 0
    copy_at: datetime | None = None
    input_digest: str | None = None  # "sha256:…" of what the run read (see pipeline/core/digest.py)
    extra: dict[str, int] = field(default_factory=dict)  # other totals for the run row (lines, files, …)
    accounting: Accounting = field(default_factory=Accounting)  # where every row read went (ingest_accounting)

    def count(self, table: str, n: int) -> None:
        self.rows[table] = self.rows.get(table, 0) + n

    def insert(self, table: str, rows: Rows, on_conflict: OnConflict = "error", count_as: str | None = None) -> int:
        """`insert` into `table`, counted under ``count_as`` (default: the table)."""
        n = insert(self.con, table, rows, on_conflict)
        self.count(count_as or table, n)
        return n

    def quarantine(self, problems: Iterable[Problem] | pl.DataFrame) -> int:
        n = quarantine(self.con, self.run_id, self.source_id, problems)
        self.quarantined += n
        return n


@dataclass
class IngestSummary:
    """What one ingest of a session store did, for its summary lines."""

    run_id: str
    source_id: str
    source_display: str
    rows: dict[str, int] = field(default_factory=dict)
    quarantined: int = 0
    new_epochs: list[int] = field(default_factory=list)
    escrows_changed: int = 0
    escrows_unchanged: int = 0
    disagreements: int = 0
    # Per escrow derived: its replay rule set and how it was chosen (rule_sets.CHOICE_SCHEMA, by escrow_id).
    rule_sets: dict[str, dict] = field(default_factory=dict)
    snapshot_disagreements: int = 0  # checkpoint slots whose host stats differ from the log or the ledger
    snapshot_disagreements_imported: int = 0  # of those, in escrows joined by import
    diffs_deduplicated: int = 0  # diffs of the copy the warehouse already held with the same bytes
    diff_forks: int = 0  # diffs of the copy whose bytes differ from another copy's (pipeline/ingest/coverage.py)
    signature_forks: int = 0  # host signatures of the copy that differ from another copy's
    elapsed_s: float = 0.0
    copy_at: datetime | None = None
    # Told unchanged by its change markers, without reading it (pipeline/ingest/unchanged.py).
    markers_unchanged: bool = False
    # Where every row read went, per input (the run's `ingest_accounting` rows).
    accounting: list[AccountingRow] = field(default_factory=list)
    # With derive=False (pipeline/ingest/store.py): the escrows left to derive, and the copy's
    # (escrow_id, latest_nonce) heads its copy time is read at once they are.
    to_derive: set[str] = field(default_factory=set)
    heads: list[pl.DataFrame] = field(default_factory=list)


@contextmanager
def ingest_run(
    con: duckdb.DuckDBPyConnection,
    *,
    source_id: str,
    kind: str,
    display: str,
    label: str | None = None,
    input_digest: str | None = None,
    sample_digest: str | None = None,
) -> Iterator[IngestRun]:
    """Record an ingest run around the block: ``running`` before it, ``ok``/``failed`` after it.

    ``input_digest`` is the digest of the copy when it is known before reading (it then also
    enters the run id); a block that learns it while reading sets ``run.input_digest``."""
    with transaction(con):
        run_id = derived_run_id(con, source_id, kind, input_digest, sample_digest)
        run = IngestRun(con, run_id, source_id, input_digest=input_digest)
        con.execute(
            "INSERT INTO ingest_runs (run_id, source_id, source_kind, label, source_display, started_at, status, "
            "pipeline_version, input_digest, run_seq) VALUES (?, ?, ?, ?, ?, now(), 'running', ?, ?, "
            "(SELECT coalesce(max(run_seq), 0) + 1 FROM ingest_runs))",
            [run.run_id, source_id, kind, label, display, pipeline_version(), input_digest],
        )
    status = "failed"
    try:
        with live_run(run.run_id):
            yield run
        run.accounting.check()  # a run whose rows do not balance is not ok
        status = "ok"
    finally:
        totals = run.rows | run.extra | {"quarantined": run.quarantined}
        with transaction(con):
            run.accounting.record(con, run.run_id, source_id)
            con.execute(
                "UPDATE ingest_runs SET finished_at = now(), status = ?, rows = ?, copy_at = ?, input_digest = ? "
                "WHERE run_id = ?",
                [status, json.dumps(totals), run.copy_at if status == "ok" else None, run.input_digest, run.run_id],
            )
