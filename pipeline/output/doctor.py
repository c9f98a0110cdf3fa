"""The `doctor` task: what a source holds, and with a warehouse what that warehouse found about it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipeline.evidence.buildcheck import BuildCheck, check, loaded_timeline
from pipeline.ingest.accounting import AccountingRow, last_source_accounting
from pipeline.ingest.coverage import source_escrow_findings
from pipeline.ingest.store import source_findings
from pipeline.output.render.text import escrow_finding_lines
from pipeline.sources.store.base import SourceDescription

if TYPE_CHECKING:
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


def source_report(store: SessionStore, con: duckdb.DuckDBPyConnection | None) -> SourceReport:
    """The store's description; with `con`, the warehouse's findings about it (copies that disagree,
    partial escrows, the build timeline against the vLLM logs, the newest run's accounting)."""
    if con is None:
        return SourceReport(store.describe())
    findings = source_findings(con, store.source_id)
    lines = escrow_finding_lines(source_escrow_findings(con, store.source_id))
    builds = check(con, loaded_timeline(con), None)
    accounting = last_source_accounting(con, store.source_id)
    return SourceReport(store.describe(), findings, builds, lines, accounting)
