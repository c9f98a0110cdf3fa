"""Which upstream release line wrote a session store, from its `schema_migrations` rows.

Migration ids mean different things on different lines (PostgreSQL step 10 is the escrow cache on
v0.2.14 and the validation leases on the HA line; SQLite steps 6 and 7 changed meaning when the
list was squashed), so a line is recognised from (id, name) pairs, never from ids alone. The reader
itself never depends on the line: it follows the actual columns (see base.conform). The line is
what `doctor` reports, with the steps no known line has.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Step = tuple[int, str]

_PG_BASE: tuple[Step, ...] = (
    (1, "devshard_session_index"),
    (2, "devshard_session_index_by_epoch"),
    (3, "devshard_sessions_parent"),
    (4, "devshard_diffs_parent"),
    (5, "devshard_signatures_parent"),
    (6, "devshard_snapshots_parent"),
    (7, "devshard_sealed_inferences_parent"),
    (8, "devshard_slot_validation_obs_parent"),
    (9, "devshard_inference_validation_obs_parent"),
)
_SQLITE_BASE: tuple[Step, ...] = (
    (1, "sessions"),
    (2, "diffs"),
    (3, "signatures"),
    (4, "snapshots"),
    (5, "sealed_inferences"),
)


@dataclass(frozen=True)
class ReleaseLine:
    name: str
    layout: str  # "postgres", "sqlite_epoch" or "sqlite_meta"
    steps: tuple[Step, ...]  # every step the line knows, in order
    markers: tuple[Step, ...] = ()  # steps only this line has: a copy of the line holds them
    note: str = ""


LINES: tuple[ReleaseLine, ...] = (
    ReleaseLine("v0.2.13", "postgres", _PG_BASE),
    ReleaseLine(
        "v0.2.14", "postgres", _PG_BASE + ((10, "devshard_escrow_cache"),), markers=((10, "devshard_escrow_cache"),)
    ),
    ReleaseLine(
        "HA line",
        "postgres",
        _PG_BASE
        + (
            (10, "devshard_validation_leases_parent"),
            (11, "devshard_escrow_cache"),
            (13, "devshard_storage_identity"),
            (14, "devshard_storage_challenge"),
            (15, "devshard_connection_lineage"),
        ),
        markers=((10, "devshard_validation_leases_parent"),),
        note="step 12 skipped",
    ),
    ReleaseLine(
        "snapshot-import line",
        "postgres",
        _PG_BASE
        + (
            (10, "devshard_validation_leases_parent"),
            (11, "devshard_escrow_cache"),
            (12, "snapshot_import_watermark"),
            (13, "devshard_storage_identity"),
            (14, "devshard_storage_challenge"),
            (15, "devshard_connection_lineage"),
        ),
        markers=((12, "snapshot_import_watermark"),),
        note="sessions.imported_nonce",
    ),
    ReleaseLine(
        "old epoch list",
        "sqlite_epoch",
        _SQLITE_BASE + ((6, "sessions_version_column"), (7, "noop")),
        note="3-column sealed_inferences",
    ),
    ReleaseLine(
        "pre-squash epoch list",
        "sqlite_epoch",
        _SQLITE_BASE
        + (
            (6, "sessions_version_column"),
            (7, "slot_validation_obs"),
            (8, "sealed_inferences_obs_snapshot"),
            (10, "inference_validation_obs"),
            (11, "noop"),
        ),
        markers=((7, "slot_validation_obs"),),
        note="sealed rows without model, tokens, cost, times",
    ),
    ReleaseLine(
        "squashed epoch list",
        "sqlite_epoch",
        _SQLITE_BASE + ((6, "slot_validation_obs"), (7, "inference_validation_obs")),
        markers=((6, "slot_validation_obs"),),
    ),
    ReleaseLine(
        "squashed epoch list with snapshot import",
        "sqlite_epoch",
        _SQLITE_BASE + ((6, "slot_validation_obs"), (7, "inference_validation_obs"), (8, "snapshot_import_watermark")),
        markers=((8, "snapshot_import_watermark"),),
        note="sessions.imported_nonce",
    ),
    ReleaseLine(
        "meta list",
        "sqlite_meta",
        ((1, "escrow_epoch"), (2, "escrow_epoch_by_epoch"), (3, "noop"), (4, "escrow_cache")),
    ),
)


@dataclass(frozen=True)
class Recognition:
    """The line a migration list belongs to (None: no known line), and the steps no line knows."""

    line: str | None
    unknown: tuple[Step, ...] = ()
    foreign: tuple[Step, ...] = ()  # known steps, but of other lines than the closest one
    notes: tuple[str, ...] = field(default_factory=tuple)
    closest: str | None = None  # without a match: the line sharing the most steps with the copy

    def describe(self) -> str:
        if not self.line and not self.unknown and not self.foreign:
            return "no schema_migrations"
        text = self.line or "not a known release line"
        parts = [f"closest: {self.closest}"] if not self.line and self.closest else []
        parts += [f"unknown migrations {', '.join(f'{i} {n}' for i, n in self.unknown)}"] if self.unknown else []
        parts += [f"steps of other lines {', '.join(f'{i} {n}' for i, n in self.foreign)}"] if self.foreign else []
        return text + (f" ({'; '.join(parts + list(self.notes))})" if parts or self.notes else "")


def recognise(layout: str, steps: list[Step], columns: dict[str, list[str]] | None = None) -> Recognition:
    """The release line of one database (PostgreSQL) or file (SQLite) from its (id, name) rows.

    A line matches when every step of the copy is one of its steps and its marker steps are there
    (a copy migrated part of the way is still of its line); the tightest match wins. `columns`
    (table -> column names) adds notes where the columns contradict the line.
    """
    if not steps:
        return Recognition(None)
    have = {(int(i), str(n)) for i, n in steps}
    candidates = [line for line in LINES if line.layout == layout]
    known = {s for line in candidates for s in line.steps}
    unknown = tuple(sorted(have - known))
    matching = [line for line in candidates if have <= set(line.steps) and set(line.markers) <= have]
    notes = _column_notes(columns or {})
    if matching:
        best = min(matching, key=lambda line: len(line.steps))
        return Recognition(best.name, (), (), notes)
    # Most shared steps; on a tie the line with fewer steps (the tightest).
    closest = max(candidates, key=lambda line: (len(have & set(line.steps)), -len(line.steps)), default=None)
    foreign = tuple(sorted((have & known) - set(closest.steps))) if closest else ()
    shares = closest is not None and bool(have & set(closest.steps))
    return Recognition(None, unknown, foreign, notes, closest.name if closest is not None and shares else None)


def _column_notes(columns: dict[str, list[str]]) -> tuple[str, ...]:
    notes = []
    sessions = columns.get("sessions") or columns.get("devshard_sessions")
    if sessions is not None and "imported_nonce" in sessions:
        notes.append("sessions.imported_nonce present: escrows may be joined by import")
    sealed = columns.get("sealed_inferences") or columns.get("devshard_sealed_inferences")
    if sealed is not None and "sealed_status" not in sealed:
        notes.append("sealed_inferences has only id and seal nonce")
    return tuple(notes)
