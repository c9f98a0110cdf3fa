"""The `doctor` task: what a source holds, and with a warehouse what that warehouse found about it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

from pipeline.evidence.buildcheck import BuildCheck, check, loaded_timeline
from pipeline.ingest.accounting import AccountingRow, last_source_accounting
from pipeline.ingest.coverage import source_escrow_findings
from pipeline.ingest.store import source_findings
from pipeline.output.query.execute import named_queries
from pipeline.output.render.text import escrow_finding_lines
from pipeline.sources.store.base import SourceDescription
from pipeline.warehouse.database import fetch_frame

if TYPE_CHECKING:
    from collections.abc import Callable

    import duckdb

    from pipeline.sources.store.base import SessionStore


@dataclass(frozen=True)
class SourceReport:
    """What `doctor` says about a source: its description, and with a warehouse what it found there."""

    description: SourceDescription
    findings: dict[str, int] | None = None
    builds: BuildCheck | None = None  # with a warehouse: its build timeline against the vLLM logs
    # With a warehouse: one line per escrow of the source whose diff log is partial or whose copies disagree.
    escrow_lines: list[str] = field(default_factory=list)
    # With a warehouse: the newest run of the source that read it, and where every row it read went.
    accounting: tuple[str, list[AccountingRow]] | None = None
    # With a warehouse: the source's rows in `quarantine` (what `run`, footers and the report's Quarantine
    # count as "quarantined rows"), per (table, reason).
    quarantine: list[tuple[str, str, int]] | None = None

    def quarantine_lines(self) -> list[str]:
        """The source's quarantined rows under the name `run`, footers and reports give them, and how they
        relate to the accounting's quarantined column (input rows set aside whole)."""
        if self.quarantine is None:
            return []
        total = sum(n for _, _, n in self.quarantine)
        parts = "; ".join(f"{table}: {n:,} ({reason})" for table, reason, n in self.quarantine)
        return [
            f"quarantined rows: {total:,}" + (f" ({parts})" if parts else "") + " (table quarantine, as `run`, the "
            "footers and the report's Quarantine count them; the accounting's quarantined column counts the input "
            "rows its last ingest set aside whole, so a transaction quarantined inside a diff record it used is "
            "in this count, not in that column)"
        ]


def source_report(store: SessionStore, con: duckdb.DuckDBPyConnection | None) -> SourceReport:
    """The store's description; with `con`, the warehouse's findings about it (copies that disagree,
    partial escrows, the build timeline against the vLLM logs, the newest run's accounting)."""
    if con is None:
        return SourceReport(store.describe())
    findings = source_findings(con, store.source_id)
    lines = escrow_finding_lines(source_escrow_findings(con, store.source_id))
    builds = check(con, loaded_timeline(con), None)
    accounting = last_source_accounting(con, store.source_id)
    quarantined = fetch_frame(con, named_queries()["quarantine_summary"].sql).filter(
        pl.col("source_id") == store.source_id
    )
    by_reason = [(t, r, int(n)) for t, r, n in quarantined.select("table_name", "reason", "rows").iter_rows()]
    return SourceReport(store.describe(), findings, builds, lines, accounting, by_reason)


def doctor(source: str, connection: Callable[[], duckdb.DuckDBPyConnection] | None = None) -> SourceReport:
    """`doctor` of the source `source` names: its report, with the warehouse `connection` opens (opened once
    the source has answered) or none."""
    from pipeline.sources.store import open_store

    store = open_store(source)
    try:
        return source_report(store, connection() if connection is not None else None)
    finally:
        store.close()
