"""The one result object every evidence table returns and every renderer reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl


@dataclass
class Provenance:
    """What a reader needs to reproduce an evidence table."""

    # One per source: source_id, source_kind, label, copy_at (datetime, UTC) and input_digest
    # ("sha256:…" of what its latest successful run read; None for runs that record none).
    sources: list[dict[str, Any]]
    run_ids: list[str]
    window: dict[str, Any]  # {"epoch": N} or {"since": datetime, "until": datetime} or {}
    quarantined_rows: int
    command: str  # the exact CLI command that reproduces the table
    pipeline_version: str
    # One per source whose latest ingest failed or was interrupted: source_id, label, run_id, status.
    failed_runs: list[dict[str, Any]] = field(default_factory=list)
    # Escrows of the window whose diff log is partial (nonces no copy held) or whose copies disagree
    # (pipeline/ingest/coverage.py): epoch_id, escrow_id, latest_nonce, missing_nonces, missing_ranges,
    # forked_nonces, conflicting_seals, conflicting_signatures, complete, conflicted.
    escrow_findings: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class EvidenceResult:
    """Rows + parameters + statistics + provenance of one evidence table. Never prints."""

    evidence: str  # public name, e.g. "votes-by-build"
    title: str
    params: dict[str, Any]
    rows: pl.DataFrame
    stats: dict[str, Any] = field(default_factory=dict)
    provenance: Provenance | None = None
    notes: list[str] = field(default_factory=list)  # human remarks (e.g. "host is in no escrow")
