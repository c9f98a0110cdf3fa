"""The accounting identity of an ingest run: where every row it read went.

For each input a run reads (a table of a copy, the files of a store, payload or log directory, the
lines of a log), every row read is counted once as used (written, or kept), deduplicated (its key is
already held: an identical row, or a copy further along) or quarantined (with its reason in
`quarantine`):

    rows_read = rows_used + rows_deduplicated + rows_quarantined

The ingesters feed a run's `Accounting` as they go; `ingest_run` (pipeline/ingest/runs.py) records
it in `ingest_accounting` with the run and checks the identity first: a run that breaks it fails
with a one-line error naming the input, never a silent pass. Each count is measured where it
happens (rows out of the reader, rows a decoder or check set aside, rows an INSERT wrote), so a row
lost between them breaks the identity instead of vanishing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import duckdb

from pipeline.sources.errors import SourceError

if TYPE_CHECKING:  # polars is loaded where claims are settled: recording an unchanged copy's run needs none
    import polars as pl

IDENTITY_VIOLATIONS_SQL = (
    "SELECT run_id, input, rows_read, rows_used, rows_deduplicated, rows_quarantined FROM ingest_accounting "
    "WHERE rows_read <> rows_used + rows_deduplicated + rows_quarantined"
)


class AccountingError(SourceError):
    """Rows read that are neither used, deduplicated nor quarantined (or counted twice): one line."""


@dataclass
class Tally:
    """The counts of one input of a run."""

    unit: str = "rows"
    read: int = 0
    used: int = 0
    deduplicated: int = 0
    quarantined: int = 0
    notes: list[str] = field(default_factory=list)
    flagged: dict[str, int] = field(default_factory=dict)  # rows used as read, with something to say: count

    def balance(self) -> int:
        """Rows read that are not accounted for (negative: accounted for more than once)."""
        return self.read - self.used - self.deduplicated - self.quarantined


@dataclass(frozen=True)
class AccountingRow:
    """One input of a run as `ingest --verbose` and `doctor` show it."""

    input: str
    unit: str
    read: int
    used: int
    deduplicated: int
    quarantined: int
    note: str | None


@dataclass
class Accounting:
    """The tallies of one run, by input name."""

    tallies: dict[str, Tally] = field(default_factory=dict)

    def tally(self, name: str, unit: str = "rows") -> Tally:
        return self.tallies.setdefault(name, Tally(unit))

    def read(self, name: str, n: int, unit: str = "rows") -> None:
        self.tally(name, unit).read += n

    def used(self, name: str, n: int) -> None:
        self.tally(name).used += n

    def deduplicated(self, name: str, n: int) -> None:
        self.tally(name).deduplicated += n

    def quarantined(self, name: str, n: int) -> None:
        self.tally(name).quarantined += n

    def note(self, name: str, text: str, unit: str = "rows") -> None:
        """Something seen under `name` and deliberately not read (named, so that it is not silent)."""
        tally = self.tally(name, unit)
        if text not in tally.notes:
            tally.notes.append(text)

    def merge(self, other: Accounting) -> None:
        """Add another accounting's tallies to these."""
        for name, t in other.tallies.items():
            mine = self.tally(name, t.unit)
            mine.read, mine.used = mine.read + t.read, mine.used + t.used
            mine.deduplicated, mine.quarantined = mine.deduplicated + t.deduplicated, mine.quarantined + t.quarantined
            mine.notes += [n for n in t.notes if n not in mine.notes]
            for what, n in t.flagged.items():
                self.flag(name, what, n)

    def flag(self, name: str, what: str, n: int) -> None:
        """`n` rows of `name` that are used as read, but worth a word (e.g. diffs without transactions)."""
        if n:
            flagged = self.tally(name).flagged
            flagged[what] = flagged.get(what, 0) + n

    def rows(self) -> list[AccountingRow]:
        return [
            AccountingRow(name, t.unit, t.read, t.used, t.deduplicated, t.quarantined, _note(t))
            for name, t in sorted(self.tallies.items())
        ]

    def violations(self) -> list[str]:
        return [
            f"{name}: {t.read:,} {t.unit} read, {t.used:,} used + {t.deduplicated:,} deduplicated + "
            f"{t.quarantined:,} quarantined"
            for name, t in sorted(self.tallies.items())
            if t.balance()
        ]

    def check(self) -> None:
        """Raise AccountingError when a tally does not balance."""
        bad = self.violations()
        if bad:
            raise AccountingError(f"ingest accounting does not balance ({'; '.join(bad)})")

    def record(self, con: duckdb.DuckDBPyConnection, run_id: str, source_id: str) -> None:
        """Write the tallies as `ingest_accounting` rows of the run (inside the caller's transaction)."""
        rows = [(run_id, source_id, *vars(r).values()) for r in self.rows()]
        con.execute("DELETE FROM ingest_accounting WHERE run_id = ?", [run_id])
        if rows:
            con.executemany("INSERT INTO ingest_accounting VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)


def _note(tally: Tally) -> str | None:
    return "; ".join([*tally.notes, *(f"{n:,} {what}" for what, n in sorted(tally.flagged.items()))]) or None


def run_accounting(con: duckdb.DuckDBPyConnection, run_id: str) -> list[AccountingRow]:
    """The accounting rows of one run, by input."""
    rows = con.execute(
        "SELECT input, unit, rows_read, rows_used, rows_deduplicated, rows_quarantined, note FROM ingest_accounting "
        "WHERE run_id = ? ORDER BY input",
        [run_id],
    ).fetchall()
    return [AccountingRow(*r) for r in rows]


def last_source_accounting(con: duckdb.DuckDBPyConnection, source_id: str) -> tuple[str, list[AccountingRow]] | None:
    """The newest run of a source that read anything, and its accounting rows (None: no such run)."""
    from pipeline.warehouse.database import run_order

    found = con.execute(
        "SELECT r.run_id FROM ingest_runs r WHERE r.source_id = ? "
        "AND EXISTS (SELECT 1 FROM ingest_accounting a WHERE a.run_id = r.run_id) "
        f"ORDER BY {run_order(con, 'r.')} DESC, r.started_at DESC LIMIT 1",  # run order, not the wall clock
        [source_id],
    ).fetchall()
    return (found[0][0], run_accounting(con, found[0][0])) if found else None


def identity_violations(con: duckdb.DuckDBPyConnection, run_id: str | None = None) -> list[str]:
    """Accounting rows of the warehouse (of one run) that break the identity, one line each."""
    sql, params = IDENTITY_VIOLATIONS_SQL, []
    if run_id is not None:
        sql, params = sql + " AND run_id = ?", [run_id]
    return [
        f"run {r}: {i}: {read} read <> {u} used + {d} deduplicated + {q} quarantined"
        for r, i, read, u, d, q in con.execute(sql, params).fetchall()
    ]


def settle_claims(frame: pl.DataFrame, key: list[str], table: str, where: str) -> tuple[pl.DataFrame, int, list]:
    """Rows of one read that claim the same key: identical rows are one row (the others are counted as
    deduplicated); rows that disagree are a conflict, all of them quarantined and none chosen.

    Returns the rows to use, the number deduplicated, and the conflict problems (one per row)."""
    import polars as pl

    if frame.height < 2 or not frame.select(pl.struct(key).is_duplicated().any()).item():
        return frame, 0, []
    distinct = frame.unique(maintain_order=True)
    claims = distinct.group_by(key).len()
    conflicted = claims.filter(pl.col("len") > 1).select(key)
    problems = []
    if conflicted.height:
        rows = frame.join(conflicted, on=key, how="semi", nulls_equal=True)
        counts = rows.group_by(key).len()
        for r in counts.iter_rows(named=True):
            label = "/".join(str(r[c]) for c in key)
            problems += [
                (table, f"{label} #{i + 1}", f"{where}: {r['len']} rows claim {'/'.join(key)} {label} and disagree")
                for i in range(r["len"])
            ]
        distinct = distinct.join(conflicted, on=key, how="anti", nulls_equal=True)
    kept = frame.height - len(problems) - distinct.height
    return distinct, kept, problems
