"""Whether the epochs an evidence table covers are closed, and what an open one makes of it.

An epoch is closed by the rule of the named query ``closed_epochs`` (the one `run` reports by): every
escrow settled, or the data clock past its last settlement by the finality lag. A table over an open
epoch says so and carries a ``provisional`` mark (a note, ``stats.provisional``, ``params.closure`` and
a ``provisional`` column); a comparison with an open epoch, or a statistical test over one, is refused
unless the caller allows it (``--allow-open``): nothing that is not yet evidence reads as evidence.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.core.times import iso_utc
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.window import EvidenceError, Window
from pipeline.warehouse.database import fetch_frame

DEFAULT_FINALITY_LAG = dt.timedelta(hours=6)  # the run configuration's default (pipeline/jobs/config.py)
PROVISIONAL_COLUMN = "provisional"
ALLOW_OPEN = "--allow-open"


@dataclass(frozen=True)
class EpochClosure:
    """One epoch against the closed-epoch rule."""

    epoch: int
    escrows: int
    escrows_settled: int
    last_settled_at: dt.datetime | None
    closed_at: dt.datetime | None  # None while open
    closed_by: str | None  # "all escrows settled" | "finality lag"
    finality_lag: dt.timedelta

    @property
    def closed(self) -> bool:
        return self.closed_at is not None

    @property
    def closes(self) -> str | None:
        """When an open epoch closes, in words; None once closed."""
        if self.closed:
            return None
        lag = _duration(self.finality_lag)
        if self.last_settled_at is None:
            return f"when all escrows settle, or {lag} after the last settlement"
        return (
            f"when all escrows settle, or at {iso_utc(self.last_settled_at + self.finality_lag)} ({lag} after the last)"
        )

    def describe(self) -> str:
        """``epoch 3 closed at …Z (all escrows settled; 3 of 3 escrows settled)`` or ``epoch 4 open (0 of 3
        escrows settled; closes when all escrows settle, or 6h after the last settlement)``."""
        settled = f"{self.escrows_settled:,} of {self.escrows:,} escrows settled"
        if self.closed_at is not None:
            return f"epoch {self.epoch} closed at {iso_utc(self.closed_at)} ({self.closed_by}; {settled})"
        return f"epoch {self.epoch} open ({settled}; closes {self.closes})"

    def as_param(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "closed": self.closed,
            "escrows": self.escrows,
            "escrows_settled": self.escrows_settled,
            "closed_at": self.closed_at,
            "closed_by": self.closed_by,
            "closes": self.closes,
        }


@dataclass(frozen=True)
class Closure:
    """The epochs a table covers and their state."""

    epochs: tuple[EpochClosure, ...]
    finality_lag: dt.timedelta

    @property
    def open(self) -> tuple[EpochClosure, ...]:
        return tuple(e for e in self.epochs if not e.closed)

    @property
    def closed(self) -> bool:
        return not self.open

    def describe(self) -> str:
        if not self.epochs:
            return "no epoch's escrows in the window"
        return "; ".join(e.describe() for e in self.epochs)

    def as_param(self) -> dict[str, Any]:
        """``params.closure`` of the JSON result."""
        return {
            "closed": self.closed,
            "provisional": not self.closed,
            "open_epochs": [e.epoch for e in self.open],
            "finality_lag_seconds": self.finality_lag.total_seconds(),
            "epochs": [e.as_param() for e in self.epochs],
        }

    def note(self) -> str:
        """The line every table over an epoch or window carries."""
        return f"Closed: {self.describe()}." if self.closed else f"Provisional: {self.provisional()}."

    def provisional(self) -> str:
        return f"{'; '.join(e.describe() for e in self.open)}; every count and statistic here may still change"

    def refusal(self, what: str) -> str:
        """The one-line refusal of `what` (a comparison, a statistical test) over the open epochs."""
        return (
            f"{'; '.join(e.describe() for e in self.open)}: {what} over an open epoch is not evidence yet; "
            f"give {ALLOW_OPEN} to compute it marked provisional"
        )


def closure(
    con: duckdb.DuckDBPyConnection,
    window: Window,
    finality_lag: dt.timedelta = DEFAULT_FINALITY_LAG,
    also: tuple[int, ...] = (),
) -> Closure:
    """The state of every epoch whose escrows `window` covers (all of them for all data; the epochs of the
    inferences started and verdicts cast in a time window), and of the epochs in `also` (a compared one)."""
    table = epoch_closures(con, finality_lag)
    if window.epoch is not None:
        wanted = {window.epoch}
    elif window.since is not None:
        wanted = set(
            fetch_frame(con, sql_text("evidence/window_epochs.sql"), {"since": window.since, "until": window.until})[
                "epoch_id"
            ].to_list()
        )
    else:
        wanted = set(table)
    wanted |= set(also)
    return Closure(tuple(table[e] for e in sorted(wanted) if e in table), finality_lag)


def epoch_closures(con: duckdb.DuckDBPyConnection, finality_lag: dt.timedelta) -> dict[int, EpochClosure]:
    """Every epoch with escrows in the warehouse, by the named query ``closed_epochs``."""
    rows = fetch_frame(con, sql_text("queries/closed_epochs.sql"), {"lag_seconds": finality_lag.total_seconds()})
    return {
        int(r["epoch_id"]): EpochClosure(
            int(r["epoch_id"]),
            int(r["escrows"]),
            int(r["escrows_settled"]),
            r["last_settled_at"],
            r["closed_at"],
            r["closed_by"],
            finality_lag,
        )
        for r in rows.iter_rows(named=True)
    }


def has_test(stats: Any) -> bool:
    """Whether `stats` holds a statistical test (a result publishing ``{"test": …}``), at any depth."""
    if hasattr(stats, "as_stat"):
        stats = stats.as_stat()
    if isinstance(stats, dict):
        return "test" in stats or any(has_test(v) for v in stats.values())
    if isinstance(stats, (list, tuple)):
        return any(has_test(v) for v in stats)
    return False


def check_open(state: Closure, *, comparing: bool, allow_open: bool) -> None:
    """Refuse a comparison involving an open epoch unless `allow_open` (before anything is computed)."""
    if state.open and comparing and not allow_open:
        raise EvidenceError(state.refusal("a comparison"))


def mark(result: EvidenceResult, state: Closure, window: Window, *, allow_open: bool) -> EvidenceResult:
    """`result` saying whether its epochs are closed (a note, ``params.closure``), and when one is open,
    ``stats.provisional``. A statistical test over an epoch or time window that covers an open epoch is
    refused unless `allow_open`; a table of such a window gets a ``provisional`` column (true), so that CSV
    says it too. All data (no window) on a live warehouse always holds the current epoch: it is said in the
    note, params and stats, not refused, and rows of one epoch each (an ``epoch`` column) say whether theirs
    is open."""
    bounded = window.epoch is not None or window.since is not None
    if state.open and bounded and not allow_open and has_test(result.stats):
        raise EvidenceError(state.refusal("a statistical test"))
    result.params = {**result.params, "closure": state.as_param()}
    if state.epochs:
        result.notes = [*result.notes, state.note()]
    if state.open:
        result.stats = {**result.stats, "provisional": state.provisional()}
        if bounded or allow_open:
            result.rows = result.rows.with_columns(pl.lit(True).alias(PROVISIONAL_COLUMN))
        elif "epoch" in result.rows.columns:
            open_epochs = [e.epoch for e in state.open]
            result.rows = result.rows.with_columns(pl.col("epoch").is_in(open_epochs).alias(PROVISIONAL_COLUMN))
    return result


def is_closure_note(note: str) -> bool:
    return note.startswith(("Closed: ", "Provisional: "))


def _duration(lag: dt.timedelta) -> str:
    seconds = int(lag.total_seconds())
    if seconds and seconds % 86400 == 0:
        return f"{seconds // 86400}d"
    if seconds and seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds and seconds % 60 == 0:
        return f"{seconds // 60}m"
    return f"{seconds}s"
